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

// Two processes writing one log (each through OpenShared, as every
// ccrelay of a state folder writes ccrelay.log) keep it bounded as one
// does: each sees the other's lines in the size, and once one turned it
// over the other writes its next line in the new file.
func TestSharedBounded(t *testing.T) {
	const limit = 1000
	path := filepath.Join(t.TempDir(), "ccrelay.log")
	a, err := OpenShared(path, limit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenShared(path, limit)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		w := a
		if i%2 == 1 {
			w = b
		}
		fmt.Fprintf(w, "line %04d of one of the two\n", i)
	}
	a.Close()
	b.Close()
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if len(cur) >= limit || len(old) > limit+40 || len(old) < limit {
		t.Fatalf("sizes %d and %d, limit %d", len(cur), len(old), limit)
	}
	if !bytes.HasSuffix(cur, []byte("line 0499 of one of the two\n")) {
		t.Fatalf("the newest lines: %q", cur[max(0, len(cur)-40):])
	}
	// Every line since the older file starts is in one of the two, in order.
	all := string(old) + string(cur)
	first := 0
	fmt.Sscanf(all, "line %04d", &first)
	for i := first; i < 500; i++ {
		if !bytes.Contains([]byte(all), fmt.Appendf(nil, "line %04d of", i)) {
			t.Fatalf("line %d is in neither file", i)
		}
	}
}

// Trim bounds a file another process appends to through a file it keeps
// open (launchd's StandardErrorPath): the last limit bytes go to NAME.1,
// the file is emptied in place and the other process's next line starts it.
func TestTrim(t *testing.T) {
	const limit = 1000
	dir := t.TempDir()
	path := filepath.Join(dir, "ccrelay-daemon.log")
	if err := Trim(path, limit); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("Trim made a missing file")
	}
	held, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	held.Write(bytes.Repeat([]byte("x"), limit-1))
	if err := Trim(path, limit); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != limit-1 {
		t.Fatalf("a file under the limit was trimmed to %d", fi.Size())
	}
	for i := range 3 * limit / 10 {
		fmt.Fprintf(held, "%09d\n", i)
	}
	if err := Trim(path, limit); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path + ".1")
	if len(old) != limit || !bytes.HasSuffix(old, []byte("000000299\n")) {
		t.Fatalf("the older file holds %d bytes ending %q", len(old), old[max(0, len(old)-10):])
	}
	held.Write([]byte("next\n"))
	if cur, _ := os.ReadFile(path); string(cur) != "next\n" {
		t.Fatalf("after the trim the file holds %q", cur[:min(len(cur), 40)])
	}
}
