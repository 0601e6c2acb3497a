package scanner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// maxScannerFDs bounds the descriptors a running scanner holds on Linux
// (inotify: one for the watcher and its wake-up pipe; files are opened only
// while a pass reads them).
const maxScannerFDs = 8

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Descriptors held by the scanner with 1,000 transcripts in the project
// folder: a few on Linux, whatever their number. It also reports what
// fsnotify's kqueue backend (macOS) would hold for the same watches: it
// opens every entry of a watched folder.
func TestScannerDescriptors(t *testing.T) {
	dir := t.TempDir()
	for i := range 1000 {
		appendTo(t, filepath.Join(dir, fmt.Sprintf("%08d-0000-4000-8000-000000000000.jsonl", i)), userLine(fmt.Sprint("u", i), "a"))
	}
	before := openFDs(t)
	h := start(t, dir, Config{})
	h.sc.AddSession("00000007-0000-4000-8000-000000000000")
	waitFor(t, "first record", func() bool { return len(h.sink.uuids(false)) == 1 })
	<-h.sc.Synced()
	held := openFDs(t) - before
	h.stop()
	kq := 0
	for d := range h.sc.watched {
		ents, _ := os.ReadDir(d)
		kq += 1 + len(ents)
	}
	t.Logf("1,000 transcripts: %d descriptors held (inotify); fsnotify's kqueue would hold %d for the same %d folders", held, kq, len(h.sc.watched))
	if held > maxScannerFDs {
		t.Fatalf("the scanner holds %d descriptors with 1,000 transcripts, want at most %d", held, maxScannerFDs)
	}
}
