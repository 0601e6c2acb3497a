package apiclient

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tmpfsChildEnv names the mount point when the test runs as the child in
// its own mount namespace.
const tmpfsChildEnv = "CCRELAY_TEST_TMPFS_CHILD"

// The outbox on a real file system that runs out of space: a 512 KiB
// tmpfs, mounted in a private mount namespace (root on Linux only), filled
// up while the client sends. Appends fail with ENOSPC and leave the log as
// it was; once the space returns every envelope reaches the relay once, in
// order, and a reopened outbox sends nothing again.
func TestOutboxFullTmpfs(t *testing.T) {
	if mnt := os.Getenv(tmpfsChildEnv); mnt != "" {
		tmpfsChild(t, mnt)
		return
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root (a tmpfs in a private mount namespace); CI must run it")
		}
		t.Skip("needs root: mounts a small tmpfs in a private mount namespace")
	}
	mnt := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutboxFullTmpfs$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), tmpfsChildEnv+"="+mnt)
	// Go makes the new namespace's mounts private: the tmpfs is seen by
	// the child only, and goes away with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tmpfs: full disk survived") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "tmpfs:") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// recordingLog remembers the outcome of the log's writes.
type recordingLog struct {
	*os.File
	mu      sync.Mutex
	partial int // failed writes that wrote some bytes
	failed  int
}

func (f *recordingLog) note(n int, err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	f.failed++
	if n > 0 {
		f.partial++
	}
	f.mu.Unlock()
}

func (f *recordingLog) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.note(n, err)
	return n, err
}

func (f *recordingLog) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.note(n, err)
	return n, err
}

func tmpfsChild(t *testing.T, mnt string) {
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=512k,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	defer syscall.Unmount(mnt, 0)
	r := newRelay(t)
	dir := filepath.Join(mnt, "outbox")
	var logs []*recordingLog
	var mu sync.Mutex
	open := func() *Outbox {
		box, err := OpenOutboxWith(dir, OutboxOptions{Logger: quiet, OpenLog: func(path string) (LogFile, error) {
			f, err := openLogFile(path)
			if err != nil {
				return nil, err
			}
			rl := &recordingLog{File: f.(*os.File)}
			mu.Lock()
			logs = append(logs, rl)
			mu.Unlock()
			return rl, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return box
	}
	box := open()
	ctx := context.Background()
	all := envs(sessT, 0, 3000)
	next := 0
	appendSome := func(n int) error {
		err := box.Append(ctx, sessT, all[next:next+n])
		if err == nil {
			next += n
		}
		return err
	}
	if err := appendSome(101); err != nil {
		t.Fatal(err)
	}
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, BatchSize: 50, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}, box)

	// Fill the disk but for a few pages: an append of more than that
	// fails (part-way, where the file system writes what fits).
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bfree)*st.Bsize - 3*st.Bsize
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for free > 0 {
		n, err := filler.Write(chunk[:min(free, int64(len(chunk)))])
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		free -= int64(n)
	}
	filler.Close()
	// Appends fail with ENOSPC and leave the log as it was.
	failures := 0
	for range 20 {
		// over 3 pages: a write that starts, then fails
		before, err := os.Stat(filepath.Join(dir, logName))
		if err != nil {
			t.Fatal(err)
		}
		err = appendSome(200)
		if err == nil {
			continue // a compaction may have made room
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Append on a full disk: %v", err)
		}
		failures++
		after, _ := os.Stat(filepath.Join(dir, logName))
		if after.Size() != before.Size() {
			t.Fatalf("log is %d bytes after a failed append, was %d", after.Size(), before.Size())
		}
	}
	mu.Lock()
	partial := 0
	for _, l := range logs {
		l.mu.Lock()
		partial += l.partial
		l.mu.Unlock()
	}
	mu.Unlock()
	// Some kernels' tmpfs refuse a write that does not fit as a whole
	// (Linux 6.18 does): the part-way case is TestOutboxFullDisk's.
	if failures == 0 {
		t.Fatal("the full disk was not exercised: no append failed")
	}
	// Space returns.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	for next < len(all) {
		if err := appendSome(min(100, len(all)-next)); err != nil {
			t.Fatal(err)
		}
	}
	rc.finish(t)
	box.Close()
	// A restart sends nothing more.
	box = open()
	defer box.Close()
	if rest := drain(t, box); len(rest) != 0 {
		t.Fatalf("a reopened outbox sends %d envelopes again", len(rest))
	}
	r.halt()
	checkStored(t, sessT, r.ids(sessT), all)
	t.Logf("tmpfs: full disk survived: %d failed appends (%d part-way), %d envelopes stored once", failures, partial, len(all))
}
