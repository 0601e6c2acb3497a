package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A Codex thread is run from the app by one ccrelay at a time: two
// app-servers on one thread would each take prompts and write its rollout
// with their own idea of it. The ccrelay that runs a thread in remote mode
// holds an exclusive lock on a file of the state folder named by the
// thread (CodexThreadLockPath) for as long as it runs; the kernel drops it
// when that process dies, however it dies. The daemon, which knows a new
// thread's id only once Codex chose it, asks the lock whether a thread
// runs before it resumes one (CodexThreadBusy).

// ErrCodexThreadBusy: another ccrelay runs the thread.
var ErrCodexThreadBusy = errors.New("another ccrelay runs this Codex thread already")

// CodexThreadLock is the lock of a Codex thread, held until Release.
type CodexThreadLock struct{ f *os.File }

// CodexThreadLockPath is the lock file of thread in the state folder.
func CodexThreadLockPath(state, thread string) string {
	return filepath.Join(state, "codex", "threads", strings.ToLower(thread)+".lock")
}

// LockCodexThread takes the lock of thread (a thread id, a UUID) in the
// state folder, without waiting: ErrCodexThreadBusy when another process
// holds it.
func LockCodexThread(state, thread string) (*CodexThreadLock, error) {
	if !ValidSessionID(thread) {
		return nil, fmt.Errorf("lock Codex thread %q: not a thread id", thread)
	}
	path := CodexThreadLockPath(state, thread)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock Codex thread %s: %w", thread, err)
	}
	// Never through a symbolic link: it could make this open (and create)
	// a file elsewhere, or share a lock another user holds.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openNoFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock Codex thread %s: %w", thread, err)
	}
	if err := lockFile(f, false); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("Codex thread %s: %w", thread, ErrCodexThreadBusy)
		}
		return nil, fmt.Errorf("lock Codex thread %s: %w", thread, err)
	}
	return &CodexThreadLock{f: f}, nil
}

// Release gives the lock back (the file stays, for the next run).
func (l *CodexThreadLock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unlockFile(l.f)
	_ = l.f.Close()
	l.f = nil
}

// CodexThreadBusy reports whether a ccrelay runs thread now (holds its
// lock in the state folder).
func CodexThreadBusy(state, thread string) bool {
	l, err := LockCodexThread(state, thread)
	if err != nil {
		return errors.Is(err, ErrCodexThreadBusy)
	}
	l.Release()
	return false
}
