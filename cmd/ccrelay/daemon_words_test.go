package main

import (
	"strings"
	"testing"
)

// The daemon starts Codex sessions as well as Claude Code's: its help and
// the service `ccrelay daemon install` writes say so.
func TestDaemonNamesBothAgents(t *testing.T) {
	for what, text := range map[string]string{"help": newDaemonCmd().Long, "service": daemonService.what} {
		if !strings.Contains(text, "Claude Code") || !strings.Contains(text, "Codex") {
			t.Errorf("the daemon's %s does not name both agents: %q", what, text)
		}
	}
	if strings.Contains(newDaemonCmd().Long, "one of Claude Code's past sessions") {
		t.Error("the help says Resume continues only Claude Code's sessions")
	}
}
