package mapper

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// The open turn a mapper reports (kept by a launcher that then stops) is
// ended by a fresh mapper (the next launcher's): its calls end once, its
// subagents stop, the turn ends with the cut's status, and later results
// of those calls add nothing.
func TestOrphan(t *testing.T) {
	before := New(testSession)
	feed(t, before,
		user("p1", "look"),
		asst("a1", bl(toolUse("ag", "Agent", map[string]any{"prompt": "find it", "description": "Find"}), toolUse("t1", "Bash", nil))),
		r("type", "assistant", "uuid", "s1", "isSidechain", true, "parent_tool_use_id", "ag", "message", msg("assistant", bl(toolUse("t2", "Read", nil)))))
	ot := before.Open()
	b, err := json.Marshal(ot)
	if err != nil {
		t.Fatal(err)
	}
	var kept OpenTurn
	if err := json.Unmarshal(b, &kept); err != nil || !kept.Equal(ot) {
		t.Fatalf("kept %s as %+v (%v)", b, kept, err)
	}
	next := New(testSession)
	out := next.Orphan(kept, Cut{Status: protocol.StatusFailed, Result: "gone", Note: "stopped"})
	eq(t, describeAll(out), "TCE(t1)[err][result=gone]", "TCE(t2)[sub="+sub("ag")+"][err][result=gone]", "SVC(stopped)", "P[sub="+sub("ag")+"]", "TE(failed)")
	for _, e := range out {
		if e.Turn != ot.Turn {
			t.Fatalf("%s in turn %s, want %s", describe(e), e.Turn, ot.Turn)
		}
	}
	if got := feed(t, next, user("r1", bl(toolResult("t1", "late", false)))); len(got) != 0 {
		t.Fatalf("a late result: %q", got)
	}
	if next.Turn() != "" || next.Open().Turn != "" {
		t.Fatal("the turn stays open")
	}
}

// A turn Claude had answered, waiting only for its end (local mode ends a
// turn at the next prompt or turn_duration), ends completed, as replay
// ends it.
func TestOrphanFinished(t *testing.T) {
	before := New(testSession)
	feed(t, before, user("p1", "hi"), asst("a1", bl(text("hello"))))
	ot := before.Open()
	if ot.Unfinished {
		t.Fatalf("%+v: an answered turn is not unfinished", ot)
	}
	next := New(testSession)
	feed(t, next, user("p1", "hi"), asst("a1", bl(text("hello")))) // rebuilt from the transcript
	// The transcript holds the whole turn as the app saw it: it stays open
	// for what Claude wrote after and ends as replay ends it.
	if out := next.Orphan(ot, Cut{Status: protocol.StatusFailed, Result: "gone", Note: "stopped"}); len(out) != 0 {
		t.Fatalf("orphan of a turn the transcript holds: %q", describeAll(out))
	}
	out := next.Map(rec(t, asst("a2", bl(text("more")))))
	out = append(out, next.Map(rec(t, user("p2", "next")))...)
	eq(t, describeAll(out), "A(more)", "TE(completed)", "U(next)")
	replay := New(testSession)
	var want []protocol.Envelope
	for _, l := range []string{user("p1", "hi"), asst("a1", bl(text("hello"))), asst("a2", bl(text("more"))), user("p2", "next")} {
		want = append(want, replay.Map(rec(t, l))...)
	}
	if got := want[len(want)-3:]; got[0].ID != out[0].ID || got[1].ID != out[1].ID || got[0].Turn != out[0].Turn {
		t.Fatalf("live %q, replay %q", describeAll(out), describeAll(got))
	}
}

// An open turn carries the latest record time the mapper had seen, and
// two states of a turn that differ only in it are equal: the launcher
// rewrites its turns file only when the turn's state changes, not after
// every record. A fresh mapper has rebuilt the turn once it has it open
// with every call, ended or not.
func TestOpenTurnTimeAndRebuilt(t *testing.T) {
	m := New(testSession)
	feed(t, m, r("type", "user", "uuid", "p1", "timestamp", "2026-11-22T10:00:00.000Z", "message", msg("user", "look")),
		r("type", "assistant", "uuid", "a1", "timestamp", "2026-11-22T10:00:01.000Z", "message", msg("assistant", bl(toolUse("t1", "Bash", nil)))))
	ot := m.Open()
	if want := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC).UnixMilli(); ot.Time != want {
		t.Fatalf("time %d, want %d", ot.Time, want)
	}
	feed(t, m, r("type", "assistant", "uuid", "a2", "timestamp", "2026-11-22T10:00:02.000Z", "message", msg("assistant", bl(text("still")))))
	if later := m.Open(); later.Time == ot.Time || !later.Equal(ot) {
		t.Fatalf("%+v after a text, %+v before: want equal, at a later time", later, ot)
	}
	next := New(testSession)
	steps := []struct {
		rec  string
		want bool
	}{
		{r("type", "user", "uuid", "p1", "message", msg("user", "look")), false},
		{r("type", "assistant", "uuid", "a1", "message", msg("assistant", bl(toolUse("t1", "Bash", nil)))), true},
		{r("type", "user", "uuid", "r1", "message", msg("user", bl(toolResult("t1", "done", false)))), true},
	}
	for i, s := range steps {
		feed(t, next, s.rec)
		if got := next.Rebuilt(ot); got != s.want {
			t.Fatalf("after record %d: rebuilt %v, want %v", i+1, got, s.want)
		}
	}
	if next.Rebuilt(OpenTurn{}) {
		t.Fatal("no turn counts as rebuilt")
	}
}

// A turn the next launcher ended (Orphan) before the scanner read its
// records again (the transcript's cursor stood before them): those records
// come again with the ids the app was sent, and Claude's repair on resume
// cuts the turn again, which repeats the first cut's ids, so the relay
// drops them all. The second cut's end of the call took a new id (a call
// cut again counted as one used again in a later turn), and the app got a
// second end of the call after its turn ended.
func TestOrphanCutAgainInItsTurn(t *testing.T) {
	p1 := user("p1", "first task")
	a1 := asst("a1", bl(text("Running it."), toolUse("t1", "Bash", nil)))
	noResponse := r("type", "assistant", "uuid", "nr", "message",
		msg("assistant", bl(text(claude.NoResponseText)), "model", claude.SyntheticModel))
	sessionEndedResult := user("rr", bl(toolResult("t1", sessionEnded, true)))
	before := New(testSession)
	feed(t, before, p1, a1)
	ot := before.Open()
	stopped := Cut{Status: protocol.StatusFailed, Result: "gone", Note: "stopped"}
	for _, tc := range []struct {
		name        string
		promptFirst bool
		repair      string
	}{
		{"prompt read, then the turn ended, then No response requested", true, noResponse},
		{"prompt read, then the turn ended, then a session-ended result", true, sessionEndedResult},
		{"the turn ended, then No response requested", false, noResponse},
		{"the turn ended, then a session-ended result", false, sessionEndedResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(testSession)
			var out []protocol.Envelope
			if tc.promptFirst {
				out = append(out, m.Map(rec(t, p1))...)
			}
			out = append(out, m.Orphan(ot, stopped)...)
			for _, l := range []string{p1, a1, tc.repair} {
				out = append(out, m.Map(rec(t, l))...)
			}
			// What the app has: what the first launcher sent, then this
			// one's envelopes, each id once (the relay drops a repeat).
			seen := map[string]bool{}
			var app []protocol.Envelope
			for _, e := range append(replayed(t, p1, a1), out...) {
				if !seen[e.ID] {
					seen[e.ID] = true
					app = append(app, e)
				}
			}
			checkInvariants(t, app)
		})
	}
}

// replayed maps lines through a fresh mapper.
func replayed(t *testing.T, lines ...string) []protocol.Envelope {
	t.Helper()
	m := New(testSession)
	var out []protocol.Envelope
	for _, l := range lines {
		out = append(out, m.Map(rec(t, l))...)
	}
	return out
}
