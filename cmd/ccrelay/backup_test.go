package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ccrelay/ccrelay/relay"
)

// ccrelay backup copies a running relay's database and checks it; a relay
// started on the copy (restore) serves the same sessions.
func TestBackupRestore(t *testing.T) {
	r := startAppRelay(t)
	id, envs := r.replay(t, corpus+smallSession)
	out := filepath.Join(t.TempDir(), "copy.db")
	res := run(t, "backup", "--data", r.data, out)
	if res.code != 0 || !strings.Contains(res.stdout, "integrity ok, 1 sessions") {
		t.Fatalf("backup: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy: %v %v", fi, err)
	}
	if res := run(t, "backup", "--data", r.data, out); res.code == 0 {
		t.Fatal("backup over an existing file accepted")
	}
	// Restore: the copy as relay.db of a new data folder, with the token.
	restored := t.TempDir()
	b, _ := os.ReadFile(out)
	tok, _ := os.ReadFile(filepath.Join(r.data, relay.TokenFile))
	os.WriteFile(filepath.Join(restored, relay.StoreFile), b, 0o600)
	os.WriteFile(filepath.Join(restored, relay.TokenFile), tok, 0o600)
	cmd, base, token := startServe(t, restored, "--retain", "30d")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	ls := run(t, "sessions", "ls", "--relay", base, "--relay-token", token)
	if ls.code != 0 || !strings.Contains(ls.stdout, id) {
		t.Fatalf("restored relay lists:\n%s%s", ls.stdout, ls.stderr)
	}
	var line string
	for _, l := range strings.Split(ls.stdout, "\n") {
		if strings.HasPrefix(l, id) {
			line = l
		}
	}
	if f := strings.Fields(line); len(f) < 3 || f[2] != strconv.Itoa(len(envs)) {
		t.Fatalf("restored session %q, want %d envelopes", line, len(envs))
	}
}
