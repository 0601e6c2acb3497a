package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/launcher"
)

// followLock takes the lock that makes session followed by one follower
// at a time (dir/session.lock), and notes beside it (session.pid) the
// Claude, pid, it follows. When a follower of the same Claude holds it
// (the hook runs again after /compact), it returns nil at once: that one
// follows the session. When a follower of another Claude holds it (an
// earlier run of the session, still sending what it read after its Claude
// ended), it waits for it while pid runs, then takes it; nil once pid has
// ended.
func followLock(ctx context.Context, dir, session string, pid int) (*os.File, error) {
	path := filepath.Join(dir, session+".lock")
	for {
		f, err := launcher.TryLock(path)
		if err == nil {
			// The lock is good only if it is still the file at path: a
			// follower that ends removes it, and one that opened it just
			// before holds a lock nobody else sees.
			fi, ferr := f.Stat()
			pi, perr := os.Stat(path)
			if ferr != nil || perr != nil || !os.SameFile(fi, pi) {
				f.Close()
				continue
			}
			if err := os.WriteFile(pidPath(path), []byte(strconv.Itoa(pid)), 0o600); err != nil {
				releaseFollowLock(f)
				return nil, fmt.Errorf("follow lock: %w", err)
			}
			return f, nil
		}
		if !errors.Is(err, launcher.ErrLocked) {
			return nil, fmt.Errorf("follow lock: %w", err)
		}
		b, _ := os.ReadFile(pidPath(path))
		holder, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if holder == pid || pid <= 0 || !processAlive(pid) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(followPoll):
		}
	}
}

func pidPath(lock string) string { return strings.TrimSuffix(lock, ".lock") + ".pid" }

// releaseFollowLock removes the lock's files, then lets it go.
func releaseFollowLock(f *os.File) {
	os.Remove(pidPath(f.Name()))
	os.Remove(f.Name())
	f.Close()
}
