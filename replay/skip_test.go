package replay

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A transcript with many unusable lines does not make a replay keep them
// all: the first MaxSkipsKept are listed, the others counted.
func TestSkippedLinesBounded(t *testing.T) {
	const bad = 3*MaxSkipsKept + 7
	var b bytes.Buffer
	b.WriteString(`{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}` + "\n")
	for range bad {
		b.WriteString("{not json\n")
	}
	p := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got := replayFile(t, p)
	st := got.stats
	if st.SkippedLines != bad || len(st.Skipped) != MaxSkipsKept {
		t.Fatalf("%d lines skipped, %d kept; want %d, %d", st.SkippedLines, len(st.Skipped), bad, MaxSkipsKept)
	}
	var sum strings.Builder
	WriteSummary(&sum, st, 0)
	if !strings.Contains(sum.String(), "3007 line(s) skipped:") || !strings.Contains(sum.String(), "… and 2007 more (only the first 1000 are listed)") {
		t.Fatalf("summary:\n%s", sum.String())
	}
	sum.Reset()
	WriteSummary(&sum, st, 20)
	if !strings.Contains(sum.String(), "… and 2987 more (use --verbose to list all)") {
		t.Fatalf("summary:\n%s", sum.String())
	}
}
