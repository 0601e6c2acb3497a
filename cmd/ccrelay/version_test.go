package main

import (
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
)

// `ccrelay version` and `ccrelay --version` print the same: the module
// version and the Claude Code version ccrelay is tested with.
func TestVersionCommand(t *testing.T) {
	a, b := run(t, "version"), run(t, "--version")
	if a.code != 0 || b.code != 0 {
		t.Fatalf("exit %d and %d\n%s%s", a.code, b.code, a.stderr, b.stderr)
	}
	if a.stdout != b.stdout {
		t.Fatalf("version and --version differ:\n%s\n%s", a.stdout, b.stdout)
	}
	for _, want := range []string{"ccrelay ", "tested with Claude Code " + claude.TestedVersion + "\n", "built with go"} {
		if !strings.Contains(a.stdout, want) {
			t.Errorf("version lacks %q:\n%s", want, a.stdout)
		}
	}
}

func TestFormatVersion(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/ccrelay/ccrelay", Version: "v0.0.0-20261123192346-a71176713cbd+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "a71176713cbd8948a15a93c22dbf7837fc375018"},
			{Key: "vcs.time", Value: "2026-11-23T19:23:46Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "false"}}}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
		ld   stamp
	}{
		{"from a checkout", stamped, "ccrelay v0.0.0-20261123192346-a71176713cbd+dirty\ncommit a71176713cbd8948a15a93c22dbf7837fc375018 (2026-11-23T19:23:46Z) with local changes\nbuild date 2026-11-23T19:23:46Z\ntested with Claude Code " + claude.TestedVersion + "\nbuilt with go1.26.8 for linux/amd64\n", stamp{}},
		{"a tag", tagged, "ccrelay v1.2.3\ncommit 0123456789abcdef\ntested with Claude Code " + claude.TestedVersion + "\nbuilt with go1.26.8 for linux/amd64\n", stamp{}},
		{"no version recorded (go run)", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "ccrelay (devel)\ntested with Claude Code " + claude.TestedVersion + "\nbuilt with go1.26.8 for linux/amd64\n", stamp{}},
		{"release build (-ldflags)", stamped, "ccrelay v1.2.3\ncommit 0123456789abcdef0123456789abcdef01234567 (2026-11-23T19:23:46Z)\nbuild date 2026-11-24T08:00:00Z\ntested with Claude Code " + claude.TestedVersion + "\nbuilt with go1.26.8 for linux/amd64\n",
			stamp{"v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-11-24T08:00:00Z"}},
		{"no build info", nil, "ccrelay (devel)\ntested with Claude Code " + claude.TestedVersion + "\nbuilt with unknown Go for linux/amd64\n", stamp{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatVersion(tt.bi, "linux/amd64", tt.ld); got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// CI installs the Claude Code version ccrelay says it is tested with.
func TestCIPinsTestedClaudeVersion(t *testing.T) {
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CLAUDE_VERSION=(\S+)$`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run sets no CLAUDE_VERSION")
	}
	if string(m[1]) != claude.TestedVersion {
		t.Fatalf(".ci/run installs Claude Code %s, claude.TestedVersion is %s", m[1], claude.TestedVersion)
	}
}
