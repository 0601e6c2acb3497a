package mapper

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// FuzzCodexMap: any sequence of rollout lines maps without a panic to
// valid envelopes, with at most one turn open and nothing of a turn after
// its end.
func FuzzCodexMap(f *testing.F) {
	for _, s := range codexSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCodexStream(t, bytes.Split(data, []byte("\n")))
	})
}

// TestCodexMapShuffled: the sample rollouts with lines dropped, repeated,
// moved and cut (what a crash, a torn write or a bad follower could give)
// map to valid envelopes, one turn at a time, nothing of a turn after its
// end.
func TestCodexMapShuffled(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "codex", "testdata", "samples", "*.jsonl"))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(b, []byte("\n"))
		for range 300 {
			var in [][]byte
			for _, l := range lines {
				switch rng.IntN(12) {
				case 0: // dropped
				case 1:
					in = append(in, l, l)
				case 2:
					in = append(in, l[:rng.IntN(len(l)+1)])
				case 3:
					in = append(in, lines[rng.IntN(len(lines))])
				default:
					in = append(in, l)
				}
			}
			checkCodexStream(t, in)
		}
	}
}

func checkCodexStream(t *testing.T, lines [][]byte) {
	t.Helper()
	{
		c := NewCodex(cxThread)
		var out []protocol.Envelope
		for _, line := range lines {
			r, err := codex.Parse(line)
			if err != nil {
				continue
			}
			out = append(out, c.Map(r)...)
		}
		out = append(out, c.Flush()...)
		out = append(out, c.Close(protocol.StatusCompleted)...)
		open, ended := "", map[string]bool{}
		for i := range out {
			e := &out[i]
			if err := e.Validate(); err != nil {
				t.Fatalf("envelope %d invalid: %v", i, err)
			}
			if e.Turn != "" && ended[e.Turn] {
				t.Fatalf("envelope %d of turn %s after its end", i, e.Turn)
			}
			switch e.Ev.T {
			case protocol.KindTurnStart:
				if open != "" {
					t.Fatalf("turn %s starts while %s is open", e.Turn, open)
				}
				open = e.Turn
			case protocol.KindTurnEnd:
				open = ""
				ended[e.Turn] = true
			}
		}
	}
}
