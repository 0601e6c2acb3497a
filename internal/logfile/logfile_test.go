package logfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A log written far past its limit keeps at most twice the limit on disk,
// in two files, whole lines each, the newest in the file itself.
func TestBounded(t *testing.T) {
	const limit = 1000
	path := filepath.Join(t.TempDir(), "daemon.log")
	l, err := Open(path, limit)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		fmt.Fprintf(l, "line %04d of the daemon's log\n", i)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) >= limit || len(old) > limit+40 || len(old) < limit {
		t.Fatalf("sizes %d and %d, limit %d", len(cur), len(old), limit)
	}
	if !bytes.HasSuffix(cur, []byte("line 0499 of the daemon's log\n")) || !bytes.HasSuffix(old, []byte("\n")) || !bytes.HasPrefix(old, []byte("line ")) {
		t.Fatalf("the newest lines: %q; the older file ends %q", cur[max(0, len(cur)-40):], old[max(0, len(old)-40):])
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 && os.PathSeparator == '/' {
		t.Fatalf("mode %v", fi.Mode())
	}
	// Opened again at its limit, it turns over first.
	os.WriteFile(path, bytes.Repeat([]byte("x"), limit), 0o600)
	l, err = Open(path, limit)
	if err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("after\n"))
	l.Close()
	if b, _ := os.ReadFile(path); string(b) != "after\n" {
		t.Fatalf("after reopening at the limit: %q", b)
	}
}
