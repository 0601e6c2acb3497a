package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/launcher"
)

// A Claude Code newer than the newest tested version is warned about once,
// in the log and on the terminal, and the app gets the version and the
// warning in the session info.
func TestClaudeVersionWarning(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, bin, version string
		warn               bool
	}{
		{"newer", script("newer", `echo "2.1.999 (Claude Code)"`), "2.1.999", true},
		{"tested", script("tested", `echo "`+claude.TestedVersion+` (Claude Code)"`), claude.TestedVersion, false},
		{"older", script("older", `echo "2.1.197 (Claude Code)"`), "2.1.197", false},
		{"unreadable", script("broken", `exit 2`), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logBuf, notice bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			v, w := checkClaudeVersion(context.Background(), tt.bin, log, &notice)
			if v != tt.version || (w != "") != tt.warn {
				t.Fatalf("version %q warning %q, want %q and a warning: %v", v, w, tt.version, tt.warn)
			}
			if n := strings.Count(logBuf.String(), "level=WARN"); n != map[bool]int{true: 1, false: 0}[tt.warn] {
				t.Fatalf("%d warnings in the log:\n%s", n, logBuf.String())
			}
			if (notice.Len() > 0) != tt.warn || (tt.warn && !strings.Contains(notice.String(), claude.TestedVersion)) {
				t.Fatalf("terminal: %q", notice.String())
			}
			var info map[string]any
			if err := json.Unmarshal(sessionInfoWith("/p", launcher.SessionState{Mode: "local"}, v, w), &info); err != nil {
				t.Fatal(err)
			}
			gotV, _ := info["claudeVersion"].(string)
			gotW, _ := info["versionWarning"].(string)
			if gotV != v || gotW != w || info["mode"] != "local" || info["cwd"] != "/p" {
				t.Fatalf("info %v", info)
			}
			// The agent, with its version where the version is known.
			if gotA, _ := info["agentVersion"].(string); info["agent"] != "claude" || gotA != v {
				t.Fatalf("info %v: want agent claude at %q", info, v)
			}
		})
	}
}
