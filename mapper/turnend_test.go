package mapper

import "testing"

// A Task or Agent call still open when its turn ends stops with the turn
// (its subagent's stop), as when the turn is cut: a result Claude records
// for it later is not a second end, nor the end of a call the app never
// saw start.
func TestSubagentCallEndsWithItsTurn(t *testing.T) {
	done := r("type", "system", "subtype", "turn_duration", "uuid", "d1")
	done2 := r("type", "system", "subtype", "turn_duration", "uuid", "d2")
	async := func(uuid, id string) string {
		return user(uuid, bl(toolResult(id, "Async agent launched", false)),
			"toolUseResult", map[string]any{"isAsync": true, "agentId": "ag0"})
	}
	task := func(uuid, id string) string {
		return asst(uuid, bl(toolUse(id, "Task", map[string]any{"prompt": "look", "description": "d"})))
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string
	}{
		{"the result of a Task call after its turn ended", []string{
			user("p1", "go"), task("a1", "t1"), done,
			user("r1", bl(toolResult("t1", "found", false))), done2},
			[]string{"U(go)", "TS", "TE(completed)"}},
		{"a result before a Task call of the same id, the turn's end, the result again (found by FuzzMapperOps)", []string{
			async("r0", "t0"), task("a1", "t0"), done, async("r1", "t0"), done2},
			[]string{"TS", "TCE(t0)[result=Async agent launched]", "TE(completed)"}},
		{"a result of a Task call inside a subagent is its stop, not a call's end (found by FuzzMapperOps)", []string{
			async("r0", "t0"), task("a1", "t0"),
			user("r1", bl(toolResult("t0", "Async agent launched", false)), "isSidechain", true,
				"toolUseResult", map[string]any{"isAsync": true, "agentId": "ag0"})},
			[]string{"TS", "TCE(t0)[result=Async agent launched]", "S(d)[sub=" + sub("t0") + "]"}},
		{"a nested Agent's result in its parent subagent stops it", []string{
			user("p1", "go"), task("a1", "t1"), child("c1", "t1", "working"),
			asst("c2", bl(toolUse("inner", "Agent", map[string]any{"description": "Inner", "prompt": "deep"})), "isSidechain", true, "parent_tool_use_id", "t1"),
			child("i1", "inner", "inner work"),
			user("c3", bl(toolResult("inner", "deep done", false)), "isSidechain", true, "parent_tool_use_id", "t1")},
			[]string{"U(go)", "TS", "S(d)[sub=" + sub("t1") + "]", "A(working)[sub=" + sub("t1") + "]",
				"S(Inner)[sub=" + sub("inner") + "]", "A(inner work)[sub=" + sub("inner") + "]", "P[sub=" + sub("inner") + "]"}},
		{"a Task call answered in its turn still ends once", []string{
			user("p1", "go"), task("a1", "t1"), user("r1", bl(toolResult("t1", "found", false))), done,
			user("r2", bl(toolResult("t1", "found", false)))},
			[]string{"U(go)", "TS", "TE(completed)"}},
	} {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc.lines, tc.want) })
	}
}

// A call id used again in a later turn, and the call cut in both turns,
// gives two cut ends with ids of their own (the second repeated the
// first's id; FuzzMapperOps found it). The first keeps the id a live cut
// and Claude's repair agree on.
func TestCutSameCallTwice(t *testing.T) {
	bash := asst("a1", bl(toolUse("t3", "Bash", nil)))
	bash2 := asst("a2", bl(toolUse("t3", "Bash", nil)))
	cutEnd := "TCE(t3)[err][result=" + CutResult + "]"
	runCase(t, []string{user("p1", "run"), bash, user("p2", "again"), bash2, user("p3", "more")},
		[]string{"U(run)", "TS", "TCS(t3,Bash,Bash call,{})", cutEnd, "SVC(" + CutNote + ")", "TE(failed)",
			"U(again)", "TS", "TCS(t3,Bash,Bash call,{})", cutEnd, "SVC(" + CutNote + ")", "TE(failed)", "U(more)"})
}
