package mapper

import (
	"slices"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// What Claude records when it resumes a conversation it left unfinished.
const sessionEnded = "[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown. Check whether it took effect before relying on it or running it again.]"

func noResponse(uuid string) string {
	return r("type", "assistant", "uuid", uuid, "message", msg("assistant", bl(text(claude.NoResponseText)), "model", claude.SyntheticModel, "id", "x-"+uuid))
}

// Crash repair is Claude's bookkeeping, not a new turn: the turn Claude
// left is cut (one end per call, a note, failed), in replay as live.
func TestCrashRepair(t *testing.T) {
	cutEnd := "TCE(t1)[err][result=" + CutResult + "]"
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"2.1.330 mid-tool: the repaired result and No response requested cut the turn", []string{
			user("p1", "run it"),
			asst("a1", bl(text("Running."))),
			asst("a2", bl(toolUse("t1", "Bash", nil))),
			user("r1", bl(toolResult("t1", sessionEnded, true))),
			noResponse("n1"),
			user("p2", "again"),
			asst("a3", bl(text("Back.")))},
			[]string{"U(run it)", "TS", "A(Running.)", "TCS(t1,Bash,Bash call,{})", "TCE(t1)[err][result=" + sessionEnded + "]",
				"SVC(" + CutNote + ")", "TE(failed)", "U(again)", "TS", "A(Back.)"}},
		{"2.1.330 waiting for the model: the prompt's turn is cut", []string{
			user("p1", "run it"),
			noResponse("n1"),
			user("p2", "again")},
			[]string{"U(run it)", "TS", "SVC(" + CutNote + ")", "TE(failed)", "U(again)"}},
		{"2.1.330 after a result: the turn is cut", []string{
			user("p1", "run it"),
			asst("a1", bl(toolUse("t1", "Bash", nil))),
			user("r1", bl(toolResult("t1", "ran", false))),
			noResponse("n1")},
			[]string{"U(run it)", "TS", "TCS(t1,Bash,Bash call,{})", "TCE(t1)[result=ran]", "SVC(" + CutNote + ")", "TE(failed)"}},
		{"2.1.197 mid-tool: no repair, the next prompt cuts the turn", []string{
			user("p1", "run it"),
			asst("a1", bl(toolUse("t1", "Bash", nil))),
			user("p2", "again")},
			[]string{"U(run it)", "TS", "TCS(t1,Bash,Bash call,{})", cutEnd, "SVC(" + CutNote + ")", "TE(failed)", "U(again)"}},
		{"No response requested after a finished turn: nothing", []string{
			user("p1", "hi"),
			asst("a1", bl(text("hello"))),
			r("type", "system", "subtype", "turn_duration", "uuid", "d1"),
			noResponse("n1")},
			[]string{"U(hi)", "TS", "A(hello)", "TE(completed)"}},
		{"No response requested after an interrupt: nothing", []string{
			user("p1", "hi"),
			user("i1", "[Request interrupted by user]"),
			noResponse("n1")},
			[]string{"U(hi)"}},
		{"the repair of a call an earlier run ended, which this mapper never saw: nothing", []string{
			user("r1", bl(toolResult("t9", sessionEnded, true))),
			noResponse("n1"),
			user("p2", "again")},
			[]string{"U(again)"}},
		{"a tool id used again in a later turn is a new call: its result ends it", []string{
			user("p1", "run it"),
			asst("a1", bl(toolUse("t1", "Bash", nil))),
			user("r1", bl(toolResult("t1", "ran", false))),
			asst("a2", bl(text("Done."))),
			r("type", "system", "subtype", "turn_duration", "uuid", "d1"),
			user("p2", "again"),
			asst("a3", bl(toolUse("t1", "Bash", nil))),
			user("r2", bl(toolResult("t1", "ran again", false))),
			asst("a4", bl(text("Done again.")))},
			[]string{"U(run it)", "TS", "TCS(t1,Bash,Bash call,{})", "TCE(t1)[result=ran]", "A(Done.)", "TE(completed)",
				"U(again)", "TS", "TCS(t1,Bash,Bash call,{})", "TCE(t1)[result=ran again]", "A(Done again.)"}},
		{"a foreground subagent's call: ended under it, the subagent stops", []string{
			user("p1", "look"),
			asst("a1", bl(toolUse("ag", "Agent", map[string]any{"prompt": "find it", "description": "Find"}))),
			r("type", "user", "uuid", "s1", "isSidechain", true, "parent_tool_use_id", "ag", "message", msg("user", "find it")),
			r("type", "assistant", "uuid", "s2", "isSidechain", true, "parent_tool_use_id", "ag", "message", msg("assistant", bl(toolUse("t1", "Bash", nil)))),
			user("r1", bl(toolResult("ag", sessionEnded, true))),
			noResponse("n1")},
			[]string{"U(look)", "TS", "S(Find)[sub=" + sub("ag") + "]", "A(find it)[sub=" + sub("ag") + "]", "TCS(t1,Bash,Bash call,{})[sub=" + sub("ag") + "]",
				"TCE(t1)[sub=" + sub("ag") + "][err][result=" + sessionEnded + "]", "SVC(" + CutNote + ")", "P[sub=" + sub("ag") + "]", "TE(failed)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCase(t, tt.lines, tt.want) })
	}
}

// Live cuts the turn when Claude ends; the repair the resumed Claude
// records later adds nothing, and the ids, order and statuses are those of
// replay.
func TestCrashRepairLiveEqualsReplay(t *testing.T) {
	tests := []struct {
		name        string
		before      []string // what live mapped before Claude ended
		after       []string // what the resumed Claude recorded, then went on with
		wantLive    []string
		sameAsRplay bool
	}{
		{"mid-tool", []string{user("p1", "run it"), asst("a1", bl(text("Running."))), asst("a2", bl(toolUse("t1", "Bash", nil)))},
			[]string{user("r1", bl(toolResult("t1", sessionEnded, true))), noResponse("n1"), user("p2", "again"), asst("a3", bl(text("Back.")))},
			[]string{"U(run it)", "TS", "A(Running.)", "TCS(t1,Bash,Bash call,{})", "TCE(t1)[err][result=exited]", "SVC(stopped: killed)", "TE(failed)",
				"U(again)", "TS", "A(Back.)"}, true},
		{"waiting for the model", []string{user("p1", "run it")},
			[]string{noResponse("n1"), user("p2", "again"), asst("a3", bl(text("Back.")))},
			[]string{"U(run it)", "TS", "SVC(stopped: killed)", "TE(failed)", "U(again)", "TS", "A(Back.)"}, true},
		{"two calls, 2.1.197", []string{user("p1", "run"), asst("a1", bl(toolUse("t1", "Bash", nil), toolUse("t2", "Read", nil)))},
			[]string{user("p2", "again")},
			[]string{"U(run)", "TS", "TCS(t1,Bash,Bash call,{})", "TCS(t2,Read,Read call,{})", "TCE(t1)[err][result=exited]", "TCE(t2)[err][result=exited]",
				"SVC(stopped: killed)", "TE(failed)", "U(again)"}, true},
		{"three calls, one answered", []string{user("p1", "run"), asst("a1", bl(toolUse("t1", "Bash", nil), toolUse("t2", "Read", nil), toolUse("t3", "Grep", nil))),
			user("r2", bl(toolResult("t2", "read", false)))},
			[]string{user("x1", bl(toolResult("t1", sessionEnded, true), toolResult("t3", sessionEnded, true))), noResponse("n1"), user("p2", "again")},
			[]string{"U(run)", "TS", "TCS(t1,Bash,Bash call,{})", "TCS(t2,Read,Read call,{})", "TCS(t3,Grep,Grep call,{})", "TCE(t2)[result=read]",
				"TCE(t1)[err][result=exited]", "TCE(t3)[err][result=exited]", "SVC(stopped: killed)", "TE(failed)", "U(again)"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := New(testSession)
			var got []protocol.Envelope
			for _, l := range tt.before {
				got = append(got, live.Map(rec(t, l))...)
			}
			got = append(got, live.Cut(Cut{Status: protocol.StatusFailed, Result: "exited", Note: "stopped: killed", Source: "src"})...)
			for _, l := range tt.after {
				got = append(got, live.Map(rec(t, l))...)
			}
			checkInvariants(t, got)
			eq(t, describeAll(got), tt.wantLive...)
			replay := New(testSession)
			var want []protocol.Envelope
			for _, l := range slices.Concat(tt.before, tt.after) {
				want = append(want, replay.Map(rec(t, l))...)
			}
			checkInvariants(t, want)
			if len(got) != len(want) {
				t.Fatalf("live %q\nreplay %q", describeAll(got), describeAll(want))
			}
			for i := range got {
				if got[i].ID != want[i].ID || got[i].Turn != want[i].Turn || got[i].Ev.T != want[i].Ev.T || got[i].Ev.Status != want[i].Ev.Status {
					t.Fatalf("envelope %d: live %s, replay %s\nlive %q\nreplay %q", i, describe(got[i]), describe(want[i]), describeAll(got), describeAll(want))
				}
			}
		})
	}
}

// A cut with no turn open and no prompt waiting opens a turn of its own
// from its source, or does nothing without one.
func TestCutWithoutTurn(t *testing.T) {
	m := New(testSession)
	if out := m.Cut(Cut{Status: protocol.StatusFailed, Note: "n"}); len(out) != 0 {
		t.Fatalf("cut of nothing: %q", describeAll(out))
	}
	out := m.Cut(Cut{Status: protocol.StatusFailed, Note: "stopped", Source: "s"})
	checkInvariants(t, out)
	eq(t, describeAll(out), "TS", "SVC(stopped)", "TE(failed)")
	if m.Turn() != "" || m.Unfinished() {
		t.Fatal("the turn stays open")
	}
	// A prompt waiting for its answer: only a cut that may open a turn
	// opens one for it.
	feed(t, m, user("p1", "hi"))
	if out := m.Cut(Cut{Status: protocol.StatusCancelled, OnlyOpen: true}); len(out) != 0 {
		t.Fatalf("cut of no open turn: %q", describeAll(out))
	}
	eq(t, describeAll(m.Cut(Cut{Status: protocol.StatusFailed, Note: "n"})), "TS", "SVC(n)", "TE(failed)")
}
