//go:build unix

package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A lock file that is a symbolic link (planted in a state folder others
// can write) is not followed: the lock is refused, and the file the link
// names is neither made nor locked.
func TestLockCodexThreadRefusesLink(t *testing.T) {
	state, elsewhere := t.TempDir(), t.TempDir()
	const thread = "01a21e56-0942-7741-90c7-3447d6f9e704"
	path := CodexThreadLockPath(state, thread)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(elsewhere, "made-through-the-link")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	l, err := LockCodexThread(state, thread)
	if err == nil {
		l.Release()
		t.Fatal("a lock taken through a symbolic link")
	}
	if errors.Is(err, ErrCodexThreadBusy) {
		t.Fatalf("refused as busy: %v", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was made: %v", err)
	}
}
