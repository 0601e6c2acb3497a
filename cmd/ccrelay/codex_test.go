package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
)

// ccrelay codex without Codex says so, first and alone (no line about
// where the session goes), and exits 1; --session without --remote is
// refused.
func TestCodexCommandRefusals(t *testing.T) {
	state := t.TempDir()
	res := run(t, "codex", "--state", state, "--out", filepath.Join(state, "out.jsonl"), "--codex", filepath.Join(state, "no-codex"))
	if res.code != 1 || !strings.Contains(res.stderr, "codex not found") || strings.Contains(res.stderr, "recording") {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	res = run(t, "codex", "--state", state, "--session", "01a21daf-e89b-7892-97c7-2fee8a1b050d")
	if res.code != 1 || !strings.Contains(res.stderr, "need --remote") {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// ccrelay codex's first line says which threads of the run it follows:
// each with Codex's own app server (--no-daemon, on Linux); through the
// shared background server, the TUI's default, only the first, and why.
func TestCodexFirstLineSaysWhichThreads(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "codex")
	script := "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo 'codex-cli " + codex.TestedVersion + "'; fi\nexit 0\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		each bool
	}{
		{nil, false},
		{[]string{"--no-daemon"}, runtime.GOOS == "linux"},
	} {
		state := t.TempDir()
		res := run(t, append([]string{"codex", "--state", state, "--out", filepath.Join(state, "out.jsonl"), "--codex", fake}, tc.args...)...)
		first, _, _ := strings.Cut(res.stderr, "\n")
		each := strings.Contains(first, "recording Codex's threads to ")
		only := strings.Contains(first, "recording Codex's first thread to ") && strings.Contains(first, "not a thread started after it (/new)")
		if res.code != 0 || each != tc.each || only == tc.each {
			t.Errorf("ccrelay codex %q: exit %d, first line %q; want each thread followed: %v", tc.args, res.code, first, tc.each)
		}
		if !tc.each && runtime.GOOS == "linux" && !strings.Contains(first, "shared background app server") {
			t.Errorf("ccrelay codex %q: the first line does not say why: %q", tc.args, first)
		}
	}
}
