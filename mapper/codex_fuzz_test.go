package mapper

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
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

// FuzzCodexOrder: the lines of real rollouts (the samples and what Codex
// 0.169.0 wrote) in any order, any of them dropped or repeated, lines of
// different rollouts mixed, map like any other input (checkCodexStream).
// Each two bytes of the input pick a line, so the fuzzer explores orders
// of whole records rather than JSON syntax; the seeds are each rollout in
// its own order.
func FuzzCodexOrder(f *testing.F) {
	pool, rollouts := codexLinePool(f)
	for _, idx := range rollouts {
		seed := make([]byte, 0, 2*len(idx))
		for _, i := range idx {
			seed = binary.LittleEndian.AppendUint16(seed, uint16(i))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var lines [][]byte
		for i := 0; i+1 < len(data); i += 2 {
			lines = append(lines, pool[int(binary.LittleEndian.Uint16(data[i:]))%len(pool)])
		}
		checkCodexStream(t, lines)
	})
}

// codexLinePool returns the lines of the real rollouts in testdata and,
// for each rollout, the indexes of its lines in the pool.
func codexLinePool(tb testing.TB) ([][]byte, [][]int) {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "codex", "testdata", "samples", "*.jsonl"))
	real, _ := filepath.Glob(filepath.Join("..", "codex", "testdata", "0.169.0", "*.jsonl"))
	var pool [][]byte
	var rollouts [][]int
	for _, name := range append(files, real...) {
		if strings.HasSuffix(name, ".rpc.jsonl") {
			continue // app-server exchanges, not rollouts
		}
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		var idx []int
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if len(line) > 0 {
				idx = append(idx, len(pool))
				pool = append(pool, line)
			}
		}
		rollouts = append(rollouts, idx)
	}
	if len(pool) == 0 || len(pool) > 1<<16 {
		tb.Fatalf("%d lines in the pool", len(pool))
	}
	return pool, rollouts
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

// A line read three times or more (a follower that read it again and
// again) makes a turn with an id of its own each time, as a line read
// twice does (FuzzCodexOrder found the third one taking the second's id).
func TestCodexSameLineThrice(t *testing.T) {
	for _, line := range []string{
		`{"timestamp":"2026-11-27T15:59:34.861Z","ordinal":20,"type":"event_msg","payload":{"type":"task_complete","turn_id":"T1","last_agent_message":"Done."}}`,
		`{"timestamp":"2026-11-27T15:59:34.861Z","ordinal":21,"type":"event_msg","payload":{"type":"task_started","turn_id":"T2"}}`,
	} {
		lines := [][]byte{[]byte(line), []byte(line), []byte(line), []byte(line)}
		checkCodexStream(t, lines)
	}
}
