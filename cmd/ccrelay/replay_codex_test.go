package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ccrelay replay of a Codex rollout: on stdout the envelopes of the
// mapper's golden file, and with --to the relay stores the same under the
// thread's id, once however often it is sent.
func TestReplayCodexToRelay(t *testing.T) {
	rollout := filepath.Join("..", "..", "codex", "testdata", "0.169.0", "exec_resume.jsonl")
	golden, err := os.ReadFile(filepath.Join("..", "..", "mapper", "testdata", "codex", "0.169.0_exec_resume.golden"))
	if err != nil {
		t.Fatal(err)
	}
	want := run(t, "replay", "--format", "jsonl", "-q", rollout)
	if want.code != 0 || want.stdout != string(golden) {
		t.Fatalf("replay: exit %d\n%s\n%s", want.code, want.stderr, want.stdout)
	}
	first, _, _ := strings.Cut(string(mustRead(t, rollout)), "\n")
	id := first[strings.Index(first, `"id":"`)+6:]
	id = id[:strings.IndexByte(id, '"')]

	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	state := t.TempDir()
	wantLines := strings.Split(strings.TrimSuffix(want.stdout, "\n"), "\n")
	for range 2 {
		res := run(t, "replay", "--format", "jsonl", "--to", base, "--relay-token", token, "--state", state, rollout)
		if res.code != 0 || !strings.Contains(res.stderr, "sent 12 envelopes of session "+id) {
			t.Fatalf("replay --to: exit %d\n%s", res.code, res.stderr)
		}
		sameLines(t, storedLines(t, data, id), wantLines)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
