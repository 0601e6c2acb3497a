package replay

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const (
	corpusDir = "../testdata/corpus"
	goldenDir = "../testdata/golden"
)

// corpusSessions lists every transcript of the corpus that is a session of
// its own: every .jsonl file except those under a subagents/ folder (they are
// read with their main transcript).
func corpusSessions(t testing.TB) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(corpusDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "subagents" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d corpus transcripts in %s", len(out), corpusDir)
	}
	return out
}

type replayed struct {
	jsonl []byte
	envs  []protocol.Envelope
	stats *Stats
}

func replayFile(t testing.TB, path string) replayed {
	t.Helper()
	s, err := FindSession([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	var out replayed
	var buf []byte
	st, err := Run(context.Background(), s, Options{}, func(e *protocol.Envelope) error {
		buf, err = e.AppendJSON(buf[:0])
		if err != nil {
			return err
		}
		out.jsonl = append(append(out.jsonl, buf...), '\n')
		out.envs = append(out.envs, *e)
		return nil
	})
	if err != nil && !(errors.Is(err, ErrNothingRead) && st.Lines == 0) {
		t.Fatalf("replay %s: %v", path, err)
	}
	out.stats = st
	return out
}

func goldenPath(t testing.TB, transcript string) string {
	rel, err := filepath.Rel(corpusDir, transcript)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(goldenDir, strings.TrimSuffix(rel, ".jsonl")+".golden.jsonl")
}

// Every transcript of the corpus has a golden file; every envelope in it
// validates and the stream keeps the invariants (no content after a
// turn-end, unique ids, agent envelopes in their turn).
func TestGoldens(t *testing.T) {
	for _, p := range corpusSessions(t) {
		name, _ := filepath.Rel(corpusDir, p)
		t.Run(name, func(t *testing.T) {
			got := replayFile(t, p)
			envtest.CheckInvariants(t, got.envs)
			gp := goldenPath(t, p)
			if *update {
				if err := os.MkdirAll(filepath.Dir(gp), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(gp, got.jsonl, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(gp)
			if err != nil {
				t.Fatalf("no golden file (run go test ./replay -update): %v", err)
			}
			if !bytes.Equal(got.jsonl, want) {
				t.Fatalf("output differs from %s (run go test ./replay -update and review the diff)\n%s", gp, firstDiff(got.jsonl, want))
			}
			// The golden file itself decodes and validates line by line.
			for i, line := range bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n")) {
				if len(line) == 0 {
					continue
				}
				var e protocol.Envelope
				if err := e.UnmarshalJSON(line); err != nil {
					t.Fatalf("%s:%d: %v", gp, i+1, err)
				}
				if err := e.Validate(); err != nil {
					t.Fatalf("%s:%d: %v", gp, i+1, err)
				}
			}
		})
	}
}

func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			return "line " + itoa(i+1) + ":\n got " + string(gl) + "\nwant " + string(wl)
		}
	}
	return ""
}

func itoa(i int) string { return strconv.Itoa(i) }

// Replaying twice gives identical bytes; replaying the merged records in two
// halves through one mapper gives the same envelopes as in one piece.
func TestReplayDeterministic(t *testing.T) {
	for _, p := range corpusSessions(t) {
		name, _ := filepath.Rel(corpusDir, p)
		t.Run(name, func(t *testing.T) {
			a, b := replayFile(t, p), replayFile(t, p)
			if !bytes.Equal(a.jsonl, b.jsonl) {
				t.Fatal("two replays differ")
			}
			whole := mapInPieces(t, p, 1)
			halves := mapInPieces(t, p, 2)
			if !bytes.Equal(whole, a.jsonl) {
				t.Fatal("mapping the records by hand differs from Run")
			}
			if !bytes.Equal(whole, halves) {
				t.Fatalf("two halves differ from one piece\n%s", firstDiff(halves, whole))
			}
		})
	}
}

// mapInPieces reads every record first, then maps them in n pieces, each
// piece from a fresh copy of the records (as a scanner reading appended
// bytes would), through one mapper and one dedupe set.
func mapInPieces(t testing.TB, path string, n int) []byte {
	s, raws := readRaw(t, path)
	m := mapper.New(s.ID)
	var dd claude.Dedupe
	var out, buf []byte
	size := (len(raws) + n - 1) / n
	for start := 0; start < len(raws); start += size {
		end := min(start+size, len(raws))
		for _, raw := range raws[start:end] {
			r, err := claude.Parse(bytes.Clone(raw))
			if err != nil {
				t.Fatal(err)
			}
			if !claude.IsConversationType(r.Type) || dd.Seen(r) {
				continue
			}
			for _, e := range m.Map(r) {
				buf, _ = e.AppendJSON(buf[:0])
				out = append(append(out, buf...), '\n')
			}
		}
	}
	return out
}

// readRaw reads the lines of a session's records in merged order.
func readRaw(t testing.TB, path string) (Session, [][]byte) {
	t.Helper()
	s, err := FindSession([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	mg, err := Open(s.Files(), 0, func(Skip) {})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	var raws [][]byte
	for {
		it, err := mg.Next()
		if err == io.EOF {
			return s, raws
		}
		if err != nil {
			t.Fatal(err)
		}
		if it.Record.Raw != nil {
			raws = append(raws, bytes.Clone(it.Record.Raw))
		}
	}
}
