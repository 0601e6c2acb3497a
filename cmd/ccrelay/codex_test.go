package main

import (
	"path/filepath"
	"strings"
	"testing"
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
