package mapper

import (
	"encoding/json"
	"testing"

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
