package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Where the relay token comes from: a file of the user's only (read once,
// trimmed), the flag with a warning that it shows in ps, or the
// environment.
func TestRelayToken(t *testing.T) {
	file := func(content string, mode os.FileMode) string {
		p := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("CCRELAY_TOKEN", "from-env")
	for _, tc := range []struct {
		name, flag, file string
		want, err, warn  string
	}{
		{name: "file", file: file("  tok-1\n", 0o600), want: "tok-1"},
		{name: "file 0400", file: file("tok-2", 0o400), want: "tok-2"},
		{name: "file group-readable", file: file("tok", 0o640), err: "chmod 600"},
		{name: "file world-readable", file: file("tok", 0o644), err: "can be read by group or others"},
		{name: "empty file", file: file(" \n", 0o600), err: "is empty"},
		{name: "huge file", file: file(strings.Repeat("x", maxTokenFile+1), 0o600), err: "larger than"},
		{name: "file at the limit", file: file(strings.Repeat("x", maxTokenFile), 0o600), want: strings.Repeat("x", maxTokenFile)},
		{name: "missing file", file: filepath.Join(t.TempDir(), "none"), err: "no such file"},
		{name: "folder", file: t.TempDir(), err: "not a regular file"},
		{name: "flag", flag: "tok-3", want: "tok-3", warn: "--relay-token-file"},
		{name: "flag and file", flag: "a", file: file("b", 0o600), err: "not both"},
		{name: "environment", want: "from-env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := relayToken(tc.flag, tc.file, "", t.TempDir(), "http://127.0.0.1:8707", &stderr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if tc.warn == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), tc.warn) {
				t.Fatalf("stderr %q, want a warning with %q", stderr.String(), tc.warn)
			}
		})
	}
}

// The flag is wired to replay and to local/remote mode: an open token
// file is refused before anything else happens.
func TestRelayTokenFileFlag(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("tok"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"replay", "-q", "--to", "http://127.0.0.1:1", "--relay-token-file", p, "--state", t.TempDir(), corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"},
		{"--remote", "--relay", "http://127.0.0.1:1", "--relay-token-file", p, "--state", t.TempDir()},
	} {
		res := run(t, args...)
		if res.code == 0 || !strings.Contains(res.stderr, "chmod 600 "+p) {
			t.Errorf("%v: exit %d, stderr %q", args, res.code, res.stderr)
		}
	}
}
