package mapper

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// The calls a cut ended are remembered with the turn of their first cut
// as a list of the last MaxCutCalls would remember them: cutEndID gives
// what a reference that keeps that list gives (the call's own id the
// first time and in the turn of its first cut, an id from the turn in a
// later one), whatever the mix of calls and turns, and the memory it keeps
// stays bounded.
func TestCutInKeepsTheLast(t *testing.T) {
	m := New("s")
	type entry struct{ call, turn string }
	var ref []entry // first cuts, oldest first
	refFirst := map[string]string{}
	refID := func(call string) string {
		id := protocol.DeriveID("s", "cut", call, "tool-call-end")
		first, ok := refFirst[call]
		if !ok {
			refFirst[call] = m.turn
			ref = append(ref, entry{call, m.turn})
			if len(ref) > MaxCutCalls {
				delete(refFirst, ref[0].call)
				ref = ref[1:]
			}
		} else if first != m.turn {
			id = protocol.DeriveID("s", "cut", m.turn, call, "tool-call-end")
		}
		return id
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const steps = 5*MaxCutCalls + 500
	for n := range steps {
		if rng.IntN(4) == 0 {
			m.turn = "turn" + strconv.Itoa(rng.IntN(50))
		}
		call := "toolu_" + strconv.Itoa(rng.IntN(2*MaxCutCalls))
		want := refID(call)
		if got := m.cutEndID(call); got != want {
			t.Fatalf("step %d: cutEndID(%q) in %s = %s, want %s", n, call, m.turn, got, want)
		}
		if len(m.cutIn) > MaxCutCalls {
			t.Fatalf("step %d: %d cut calls remembered, want at most %d", n, len(m.cutIn), MaxCutCalls)
		}
	}
	if q := len(m.cutQ) - m.cutHead; q > MaxCutCalls || cap(m.cutQ) > 3*MaxCutCalls {
		t.Fatalf("the list of cut calls holds %d entries (capacity %d)", q, cap(m.cutQ))
	}
}

// A long session of turns Claude left mid-call (each cut by the next
// prompt), past the bound: every envelope id is unique, a tool id used
// again a few turns later gets an end of its own, and the mapper
// remembers at most MaxCutCalls cut calls. Then a turn whose cut was
// forgotten long ago is cut again in its turn (a launcher's kept open
// turn, ended by the next): its end repeats the first cut's id, which the
// relay drops, so the app gets no second end of the call after its turn
// ended.
func TestLongSessionCutInBounded(t *testing.T) {
	m := New(testSession)
	var out []protocol.Envelope
	const turns = 2*MaxCutCalls + 300
	var early OpenTurn
	for i := range turns {
		call := "t" + strconv.Itoa(i)
		if i%10 == 9 {
			call = "t" + strconv.Itoa(i-5) // a tool id used again
		}
		is := strconv.Itoa(i)
		out = append(out, m.Map(rec(t, user("p"+is, "task "+is)))...)
		out = append(out, m.Map(rec(t, asst("a"+is, bl(toolUse(call, "Bash", nil)))))...)
		if i == 3 {
			early = m.Open()
		}
		if len(m.cutIn) > MaxCutCalls {
			t.Fatalf("after %d turns: %d cut calls remembered, want at most %d", i+1, len(m.cutIn), MaxCutCalls)
		}
	}
	out = append(out, m.Cut(Cut{Status: protocol.StatusFailed, Result: CutResult, Note: CutNote})...)
	checkInvariants(t, out) // every id unique
	ends := 0
	for _, e := range out {
		if e.Ev.T == protocol.KindToolCallEnd {
			ends++
		}
	}
	if ends != turns {
		t.Fatalf("%d call ends for %d turns", ends, turns)
	}
	if _, kept := m.cutIn[early.Calls[0].ID]; kept || len(early.Calls) != 1 {
		t.Fatalf("turn 3's call %+v is still remembered", early.Calls)
	}

	again := m.Orphan(early, Cut{Status: protocol.StatusFailed, Result: "gone", Note: "stopped"})
	cutAgain := false
	for _, e := range again {
		cutAgain = cutAgain || e.Ev.T == protocol.KindToolCallEnd && e.Ev.Call == early.Calls[0].ID
	}
	if !cutAgain {
		t.Fatalf("the early turn's call was not cut again: %q", describeAll(again))
	}
	seen := map[string]bool{}
	var app []protocol.Envelope
	for _, e := range append(out, again...) {
		if !seen[e.ID] {
			seen[e.ID] = true
			app = append(app, e)
		}
	}
	checkInvariants(t, app)
}
