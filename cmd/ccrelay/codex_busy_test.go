package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/launcher"
)

// ccrelay codex --remote does not continue a thread that another ccrelay
// runs (its lock held): it says so before it starts anything.
func TestCodexRemoteRefusesRunningThread(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	t.Setenv("CODEX_HOME", home)
	thread := claude.NewSessionID()
	day := filepath.Join(codex.SessionsDir(home), "2026", "11", "27")
	os.MkdirAll(day, 0o700)
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-11-27T15-46-37-"+thread+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lock, err := launcher.LockCodexThread(state, thread)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	err = runCodexRemoteMode(context.Background(), &codexFlags{state: state, remote: true, session: thread, relay: "http://127.0.0.1:1"}, nil)
	if !errors.Is(err, launcher.ErrCodexThreadBusy) {
		t.Fatalf("a thread another ccrelay runs: %v, want ErrCodexThreadBusy", err)
	}
}
