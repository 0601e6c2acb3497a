package scanner

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/testutil"
)

// A sink that answers ErrHold gets the same batch again later (Retry),
// nothing is logged, and the cursor stays before it: a restart while it is
// held delivers it again as new, not as replayed.
func TestScannerHold(t *testing.T) {
	dir := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	main := filepath.Join(dir, "s1.jsonl")
	var logs testutil.SyncBuffer
	h := start(t, dir, Config{CursorFile: cursor, Logger: logTo(&logs)})
	h.sc.AddSession("s1")
	appendTo(t, main, userLine("u1", "a"))
	waitFor(t, "u1", func() bool { return len(h.sink.uuids(false)) == 1 })
	h.sink.setFail(fmt.Errorf("remote mode has not stored it yet: %w", ErrHold))
	appendTo(t, main, userLine("u2", "b"))
	waitFor(t, "u2 held twice", func() bool { return h.sink.failed() >= 2 })
	flush(t, h.sc) // a Flush returns while the batch is held
	h.stop()
	if strings.Contains(logs.String(), "cannot store") {
		t.Fatalf("a hold was logged as a failure:\n%s", logs.String())
	}
	// The cursor did not move past u2.
	h2 := start(t, dir, Config{CursorFile: cursor})
	h2.sc.AddSession("s1")
	waitFor(t, "u2 after a restart", func() bool { return len(h2.sink.uuids(false)) == 1 })
	h2.stop()
	if got := h2.sink.uuids(false); got[0] != "u2" {
		t.Fatalf("after a restart %v, want u2", got)
	}
	// Released: delivered again as a Retry.
	h3 := start(t, dir, Config{CursorFile: filepath.Join(t.TempDir(), "c.json")})
	h3.sink.setFail(ErrHold)
	h3.sc.AddSession("s1")
	waitFor(t, "a hold", func() bool { return h3.sink.failed() >= 1 })
	h3.sink.setFail(nil)
	waitFor(t, "the held batch", func() bool { return len(h3.sink.uuids(false)) == 2 })
	h3.stop()
	if h3.sink.retries == 0 {
		t.Fatal("the held batch was not delivered again as a Retry")
	}
}
