package replay

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/synth"
)

// BenchmarkParentOrder measures what reading the main transcript in parent
// order costs: the same in-memory replay as BenchmarkMapperLimit, with the
// parent order on and off (file order), on the 100 MB mix and on every real
// session of the corpus.
//
//	go test ./replay -run '^$' -bench ParentOrder -count 6 | benchstat -col /order -
func BenchmarkParentOrder(b *testing.B) {
	b.Run("mix-100MB", func(b *testing.B) {
		var mix bytes.Buffer
		if _, err := synth.Write(&mix, 100<<20, mixSources(b)...); err != nil {
			b.Fatal(err)
		}
		benchOrder(b, memSession{s: Session{ID: "mix", Main: "mix.jsonl"}, names: []string{"mix.jsonl"},
			data: [][]byte{mix.Bytes()}, size: int64(mix.Len())})
	})
	for _, p := range corpusSessions(b) {
		rel, _ := filepath.Rel(corpusDir, p)
		b.Run(strings.TrimSuffix(rel, ".jsonl"), func(b *testing.B) {
			benchOrder(b, loadMem(b, p))
		})
	}
}

// benchOrder replays ms in parent order and in file order.
func benchOrder(b *testing.B, ms memSession) {
	for _, order := range []string{"parent", "file"} {
		b.Run("order="+order, func(b *testing.B) {
			fileOrder = order == "file"
			defer func() { fileOrder = false }()
			var buf []byte
			b.ReportAllocs()
			b.SetBytes(ms.size)
			for b.Loop() {
				mapMem(b, ms, &buf)
			}
		})
	}
}
