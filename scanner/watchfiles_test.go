package scanner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// maxWatchFilesDescriptors bounds what the watches of one followed session
// without subagents hold under kqueue (its transcript, its empty subagents/
// folder).
const maxWatchFilesDescriptors = 2

// kqueueDescriptors is what fsnotify's kqueue backend (macOS, the BSDs)
// holds for the scanner's watches: one per watched file, and one per
// watched folder and per entry in it.
func kqueueDescriptors(t *testing.T, sc *Scanner) int {
	n := 0
	for p := range sc.watched {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		n++
		if fi.IsDir() {
			ents, _ := os.ReadDir(p)
			n += len(ents)
		}
	}
	return n
}

// With WatchFiles (the default where kqueue holds a descriptor per entry
// of a watched folder) the scanner watches the transcripts it follows, not
// the project folder: with 1,000 transcripts present it would hold a few
// descriptors, not 1,000. A followed transcript is read as soon as it is
// written (the watch, not the one-minute poll), and one that does not
// exist yet is found at the fallback interval once it does.
func TestScannerWatchFiles(t *testing.T) {
	dir := t.TempDir()
	name := func(i int) string {
		return filepath.Join(dir, fmt.Sprintf("%08d-0000-4000-8000-000000000000.jsonl", i))
	}
	for i := range 1000 {
		appendTo(t, name(i), userLine(fmt.Sprint("u", i), "a"))
	}
	// The followed session has a subagents/ folder (watched): no fallback
	// polling for it, so only its watch can wake the scanner in time.
	if err := os.MkdirAll(filepath.Join(dir, "00000007-0000-4000-8000-000000000000", "subagents"), 0o755); err != nil {
		t.Fatal(err)
	}
	on, off := true, false
	for _, files := range []bool{false, true} {
		t.Run(fmt.Sprint("files=", files), func(t *testing.T) {
			cfg := Config{PollInterval: time.Minute, WatchFiles: &off}
			if files {
				cfg.WatchFiles = &on
			}
			h := start(t, dir, cfg)
			defer h.stop()
			h.sc.AddSession("00000007-0000-4000-8000-000000000000")
			waitFor(t, "first record", func() bool { return len(h.sink.uuids(false)) == 1 })
			<-h.sc.Synced()
			kq := kqueueDescriptors(t, h.sc)
			t.Logf("1,000 transcripts, WatchFiles %v: kqueue would hold %d descriptors for %d watches", files, kq, len(h.sc.watched))
			if !files {
				if kq < 1000 {
					t.Fatalf("the folder's watch counts %d descriptors: the count is wrong", kq)
				}
				return
			}
			if kq > maxWatchFilesDescriptors {
				t.Fatalf("kqueue would hold %d descriptors, want at most %d", kq, maxWatchFilesDescriptors)
			}
			appendTo(t, name(7), userLine("u7b", "b"))
			waitFor(t, "a record written to the followed transcript", func() bool { return len(h.sink.uuids(false)) == 2 })
			const later = "00002000-0000-4000-8000-000000000000"
			h.sc.AddSession(later)
			<-h.sc.Synced()
			appendTo(t, filepath.Join(dir, later+".jsonl"), userLine("late", "c"))
			waitFor(t, "the transcript created after it was announced", func() bool { return len(h.sink.uuids(false)) == 3 })
		})
	}
}
