package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/lines"
	"github.com/ccrelay/ccrelay/internal/synth"
	"github.com/ccrelay/ccrelay/protocol"
)

// memSession is a session's files read into memory.
type memSession struct {
	s     Session
	names []string
	data  [][]byte
	size  int64
}

func loadMem(tb testing.TB, path string) memSession {
	tb.Helper()
	s, err := FindSession([]string{path})
	if err != nil {
		tb.Fatal(err)
	}
	ms := memSession{s: s}
	for _, p := range s.Files() {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		ms.names = append(ms.names, p)
		ms.data = append(ms.data, b)
		ms.size += int64(len(b))
	}
	return ms
}

// mapMem replays ms as Run does (merge, parse, dedupe, map, and each
// envelope encoded as replay --format jsonl writes it), from memory.
func mapMem(tb testing.TB, ms memSession, buf *[]byte) *Stats {
	st := &Stats{Other: map[string]int{}, Envelopes: map[protocol.Kind]int{}, Files: len(ms.data)}
	mg := &Merger{}
	skip := st.skip
	for i, d := range ms.data {
		mg.files = append(mg.files, newFileReader(ms.names[i], bytes.NewReader(d), io.NopCloser(nil), int64(len(d)), DefaultMaxLine, &mg.Read, skip))
	}
	if err := mg.start(); err != nil {
		tb.Fatal(err)
	}
	err := run(context.Background(), ms.s, mg, st, Options{}, func(e *protocol.Envelope) error {
		var err error
		*buf, err = e.AppendJSON((*buf)[:0])
		*buf = append(*buf, '\n')
		return err
	})
	if err != nil && !errors.Is(err, ErrNothingRead) {
		tb.Fatal(err)
	}
	return st
}

// validMem is the physical limit: the same bytes read line by line with
// the same line reader, each line checked by json.Valid.
func validMem(ms memSession) int {
	n := 0
	for _, d := range ms.data {
		bufSize := int(min(max(int64(len(d))+1, 4<<10), 256<<10))
		lr := lines.NewReader(bytes.NewReader(d), bufSize, DefaultMaxLine)
		for {
			ln, err := lr.Next()
			if err != nil {
				break
			}
			if len(bytes.TrimSpace(ln.Data)) > 0 && json.Valid(ln.Data) {
				n++
			}
		}
	}
	return n
}

// benchLimit measures, in the same run, the mapper over ms and a json.Valid
// pass over the same bytes, alternating which goes first. x-jsonvalid is
// the mapper's speed as a share of json.Valid's (goal: >= 0.6), from the
// total times of both; x-jsonvalid-best is the same share from the fastest
// pass of each, which a machine loaded by other work disturbs far less (a
// pass that was descheduled is not the fastest).
func benchLimit(b *testing.B, ms memSession) {
	var buf []byte
	var mapT, validT time.Duration
	mapBest, validBest := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	runs := 0
	b.ReportAllocs()
	for b.Loop() {
		for k := range 2 {
			t0 := time.Now()
			if (runs+k)%2 == 0 {
				mapMem(b, ms, &buf)
				d := time.Since(t0)
				mapT += d
				mapBest = min(mapBest, d)
			} else {
				validMem(ms)
				d := time.Since(t0)
				validT += d
				validBest = min(validBest, d)
			}
		}
		runs++
	}
	if mapT <= 0 || validT <= 0 {
		return
	}
	mb := float64(ms.size) * float64(runs) / 1e6
	b.ReportMetric(validT.Seconds()/mapT.Seconds(), "x-jsonvalid")
	if mapBest > 0 && validBest > 0 {
		b.ReportMetric(validBest.Seconds()/mapBest.Seconds(), "x-jsonvalid-best")
	}
	b.ReportMetric(mb/mapT.Seconds(), "map-MB/s")
	b.ReportMetric(mb/validT.Seconds(), "valid-MB/s")
}

// mixSources is every real session of the corpus (its main transcript),
// for synthetic mixes.
func mixSources(tb testing.TB) []synth.Source {
	var sources []synth.Source
	for _, p := range corpusSessions(tb) {
		s, err := synth.Load(p)
		if err != nil {
			tb.Fatal(err)
		}
		if len(s) > 0 {
			sources = append(sources, s)
		}
	}
	return sources
}

// BenchmarkMapperLimit reports the mapper's speed against json.Valid over
// the same bytes (x-jsonvalid) on a 100 MB mix of every corpus session
// (copies with their ids made unique) and on every real session of the
// corpus.
//
//	go test ./replay -run '^$' -bench MapperLimit -count 5 | benchstat -
func BenchmarkMapperLimit(b *testing.B) {
	b.Run("mix-100MB", func(b *testing.B) {
		var mix bytes.Buffer
		if _, err := synth.Write(&mix, 100<<20, mixSources(b)...); err != nil {
			b.Fatal(err)
		}
		benchLimit(b, memSession{s: Session{ID: "mix", Main: "mix.jsonl"}, names: []string{"mix.jsonl"},
			data: [][]byte{mix.Bytes()}, size: int64(mix.Len())})
	})
	for _, p := range corpusSessions(b) {
		rel, _ := filepath.Rel(corpusDir, p)
		b.Run(strings.TrimSuffix(rel, ".jsonl"), func(b *testing.B) {
			benchLimit(b, loadMem(b, p))
		})
	}
}

// The in-memory replay the benchmark measures gives what Run gives.
func TestMapMemIsRun(t *testing.T) {
	for _, p := range corpusSessions(t) {
		name, _ := filepath.Rel(corpusDir, p)
		t.Run(name, func(t *testing.T) {
			want := replayFile(t, p)
			var got, buf []byte
			ms := loadMem(t, p)
			st := &Stats{Other: map[string]int{}, Envelopes: map[protocol.Kind]int{}}
			mg := &Merger{}
			for i, d := range ms.data {
				mg.files = append(mg.files, newFileReader(ms.names[i], bytes.NewReader(d), io.NopCloser(nil), int64(len(d)), DefaultMaxLine, &mg.Read, func(Skip) {}))
			}
			if err := mg.start(); err != nil {
				t.Fatal(err)
			}
			err := run(context.Background(), ms.s, mg, st, Options{}, func(e *protocol.Envelope) error {
				var err error
				buf, err = e.AppendJSON(buf[:0])
				got = append(append(got, buf...), '\n')
				return err
			})
			if err != nil && !errors.Is(err, ErrNothingRead) {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.jsonl) {
				t.Fatalf("in memory differs from Run\n%s", firstDiff(got, want.jsonl))
			}
		})
	}
}
