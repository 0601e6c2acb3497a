package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Codex thread's lock is held by one holder at a time, and given back
// by Release (or by the holder's death, which the kernel sees to); only a
// thread id names a lock file, in the state folder.
func TestLockCodexThread(t *testing.T) {
	state := t.TempDir()
	const thread = "01a21e56-0942-7741-90c7-3447d6f9e704"
	l, err := LockCodexThread(state, thread)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockCodexThread(state, strings.ToUpper(thread)); !errors.Is(err, ErrCodexThreadBusy) {
		t.Fatalf("a second lock: %v, want ErrCodexThreadBusy", err)
	}
	if !CodexThreadBusy(state, thread) {
		t.Fatal("a held thread is not busy")
	}
	if CodexThreadBusy(state, "01a21e56-0000-7741-90c7-3447d6f9e704") {
		t.Fatal("another thread is busy")
	}
	l.Release()
	l.Release() // twice: nothing more
	if CodexThreadBusy(state, thread) {
		t.Fatal("a released thread is busy")
	}
	if fi, err := os.Stat(CodexThreadLockPath(state, thread)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	for _, bad := range []string{"", "../../x", "01a21e56/../../x"} {
		if _, err := LockCodexThread(state, bad); err == nil || errors.Is(err, ErrCodexThreadBusy) {
			t.Errorf("LockCodexThread(%q): %v", bad, err)
		}
	}
	// The two threads' files, and nothing the bad names made.
	if m, _ := filepath.Glob(filepath.Join(state, "*", "*", "*")); len(m) != 2 {
		t.Errorf("files %v", m)
	}
}
