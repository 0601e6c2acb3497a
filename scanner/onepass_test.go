package scanner

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A line is read in one pass (claude.LineParser): a line that is not
// conversation (progress, attachments: most of a transcript) costs no
// allocation, where classifying it first (PeekTypeLink) made strings of
// its type, uuid and parent, and a conversation record was then parsed
// again from a copy.
func TestReadFileOnePass(t *testing.T) {
	dir := t.TempDir()
	// allocs is the allocations of reading a main transcript of a prompt
	// and n progress lines, from a new scanner.
	allocs := func(n int) float64 {
		var sb strings.Builder
		sb.WriteString(chainLine("user", "u0", ""))
		for i := range n {
			sb.WriteString(chainLine("progress", fmt.Sprintf("p%d", i), "u0"))
		}
		path := filepath.Join(dir, fmt.Sprintf("s%d.jsonl", n))
		if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		return testing.AllocsPerRun(10, func() {
			sc, err := New(Config{ProjectDir: dir, Logger: log}, make(chanSink, 1))
			if err != nil {
				t.Fatal(err)
			}
			ss := &session{id: "s", main: path}
			f := sc.fileFor(ss, path)
			sc.readFile(ss, f, true)
			if len(f.pending) != 1 || f.pending[0].rec.UUID != "u0" {
				t.Fatalf("read %d records, want the prompt alone", len(f.pending))
			}
		})
	}
	few, many := allocs(10), allocs(210)
	if per := (many - few) / 200; per > 0.1 {
		t.Fatalf("%.2f allocations a progress line (%v for 10, %v for 210), want none", per, few, many)
	}
}

// BenchmarkReadTranscript measures a scanner's first read of a real 3 MB
// session's main transcript (every line classified, the conversation
// records parsed, deduplicated and put in parent order).
//
//	go test ./scanner -run '^$' -bench ReadTranscript -count 6 | benchstat -
func BenchmarkReadTranscript(b *testing.B) {
	src := "../testdata/corpus/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		sc, err := New(Config{ProjectDir: dir, Logger: log}, make(chanSink, 1))
		if err != nil {
			b.Fatal(err)
		}
		ss := &session{id: "s", main: path}
		f := sc.fileFor(ss, path)
		for f.more = true; f.more; {
			sc.readFile(ss, f, true)
			f.pop(ss, len(f.pending))
		}
	}
}
