package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/relay"
)

// `ccrelay sessions ls` lists the token's sessions; `sessions rm` deletes
// them (for good: ls no longer shows them), and says which it could not
// (another token's session, a bad id) with a non-zero exit.
func TestSessionsLsRm(t *testing.T) {
	const (
		mine   = "5e55a001-0000-4000-8000-00000000a001"
		kept   = "5e55a001-0000-4000-8000-00000000a002"
		theirs = "5e55a001-0000-4000-8000-00000000b001"
	)
	dir := t.TempDir()
	st, err := relay.OpenStore(filepath.Join(dir, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, c := range []struct{ session, tok string }{{mine, "alice"}, {kept, "alice"}, {theirs, "bob"}} {
		if err := st.Claim(ctx, c.session, relay.OwnerID(c.tok)); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(relay.NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), "alice", "bob").Handler())
	defer srv.Close()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sessions := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		root := newRootCmd()
		root.SetArgs(append(args, "--relay", srv.URL, "--relay-token-file", tokFile))
		root.SetOut(&out)
		root.SetErr(&errOut)
		err := root.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}
	out, _, err := sessions("sessions", "ls")
	if err != nil || !strings.Contains(out, mine) || !strings.Contains(out, kept) || strings.Contains(out, theirs) {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	out, errOut, err := sessions("sessions", "rm", mine, theirs, "nope")
	if err == nil || !strings.Contains(out, "deleted "+mine) || !strings.Contains(errOut, theirs) || !strings.Contains(errOut, "nope") {
		t.Fatalf("rm: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if _, err := st.OwnerOf(ctx, theirs); err != nil {
		t.Fatalf("another token's session was deleted: %v", err)
	}
	out, _, err = sessions("sessions", "ls")
	if err != nil || strings.Contains(out, mine) || !strings.Contains(out, kept) {
		t.Fatalf("ls after rm: %v\n%s", err, out)
	}
	if gone, err := st.Deleted(ctx, mine); err != nil || !gone {
		t.Fatalf("no tombstone: %v %v", gone, err)
	}
}

func TestParseRetain(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"1d", 24 * time.Hour, true},
		{"12h", 12 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0d", 0, false},
		{"-1h", 0, false},
		{"0s", 0, false},
		{"xd", 0, false},
		{"99999d", 0, false},
		{"soon", 0, false},
	} {
		got, err := parseRetain(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseRetain(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
