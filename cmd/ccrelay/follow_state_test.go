package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/hooksettings"
)

// The hook names the state folder install used, as an absolute path, even
// when install was given none: the hook runs with Claude's environment (an
// editor started from the desktop, a project's settings' "env"), whose
// XDG_STATE_HOME may name another folder, with another relay and other
// keys, or none; the follower must use the relay and keys install said.
func TestFollowInstallPinsState(t *testing.T) {
	home, xdg := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", xdg)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CCRELAY_RELAY", "")
	if err := followInstall("", io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(home, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := hooksettings.Parse(b)
	if err != nil || s.Count("SessionStart", isFollowHook) != 1 {
		t.Fatalf("installed settings (%v):\n%s", err, b)
	}
	want := filepath.Join(xdg, "ccrelay") // a plain path: not quoted
	if !strings.Contains(string(b), "--state "+want) {
		t.Fatalf("the hook does not name the state folder %s:\n%s", want, b)
	}
}
