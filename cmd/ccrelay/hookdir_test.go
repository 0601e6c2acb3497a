package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The hook's private folder (settings and token file) is made in the state
// folder: a ccrelay killed with SIGKILL leaves nothing in the temporary
// folder.
func TestLocalModeHookFolderInState(t *testing.T) {
	r := newLocalRun(t, recLines(0, 1), map[string]any{"hang": true})
	tmp := t.TempDir()
	cmd := r.command()
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, r.pidfile)
	hooks, _ := filepath.Glob(filepath.Join(r.state, "projects", "*", "ccrelay-hook-*", "hook.json"))
	if len(hooks) != 1 {
		t.Errorf("hook files in the state folder: %v", hooks)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitGone(t, pid)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("left in the temporary folder: %v", left)
	}
}
