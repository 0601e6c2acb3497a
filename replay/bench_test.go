package replay

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

type benchSession struct {
	id    string
	lines [][]byte
}

// loadCorpus reads every corpus session (merged in timestamp order) into
// memory.
func loadCorpus(b *testing.B) ([]benchSession, int64) {
	var out []benchSession
	var total int64
	for _, p := range corpusSessions(b) {
		s, raws := readRaw(b, p)
		for _, r := range raws {
			total += int64(len(r)) + 1
		}
		out = append(out, benchSession{id: s.ID, lines: raws})
	}
	return out, total
}

// BenchmarkMapper measures parse + dedupe + map over the whole corpus mix,
// from raw lines in memory (no file I/O). MB/s is JSONL input per second.
func BenchmarkMapper(b *testing.B) {
	sessions, total := loadCorpus(b)
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, s := range sessions {
			m := mapper.New(s.id)
			var dd claude.Dedupe
			for _, line := range s.lines {
				r, err := claude.Parse(line)
				if err != nil || !claude.IsConversationType(r.Type) || dd.Seen(r) {
					continue
				}
				_ = m.Map(r)
			}
		}
	}
}

// BenchmarkReplayJSONL measures a whole replay of the corpus from files,
// including encoding every envelope.
func BenchmarkReplayJSONL(b *testing.B) {
	paths := corpusSessions(b)
	var total int64
	for _, p := range paths {
		s, _ := FindSession([]string{p})
		for _, f := range s.Files() {
			total += fileSize(f)
		}
	}
	b.SetBytes(total)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		for _, p := range paths {
			replayTo(b, p, &buf)
		}
	}
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func replayTo(b *testing.B, p string, buf *[]byte) {
	s, _ := FindSession([]string{p})
	_, err := Run(context.Background(), s, Options{}, func(e *protocol.Envelope) error {
		var err error
		*buf, err = e.AppendJSON((*buf)[:0])
		return err
	})
	if err != nil && !errors.Is(err, ErrNothingRead) {
		b.Fatal(err)
	}
}
