package mapper

import (
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

func sc(kv ...any) []any { return append([]any{"isSidechain", true}, kv...) }

func child(uuid, parentTool, txt string) string {
	return asst(uuid, bl(text(txt)), "parent_tool_use_id", parentTool, "isSidechain", true)
}

// §8.3, reference-behavior §2.3–2.9 with D3, D4, D11 and D13.
func TestSubagents(t *testing.T) {
	sA, sB := "[sub="+sub("agent_1")+"]", "[sub="+sub("task_2")+"]"
	agentCall := asst("p1", bl(toolUse("agent_1", "Agent", map[string]any{
		"description": "Inspect translations", "prompt": "Check the i18n files", "mode": "x"})))
	taskCall := asst("p2", bl(toolUse("task_2", "Task", map[string]any{"description": "Search docs", "prompt": "Find the docs"})))
	root := user("r1", "Find the docs", sc("parentUuid", nil)...)
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"#17 D4: Agent tool_use emits no tool-call-start", []string{agentCall}, []string{"TS"}},
		{"#18 child starts the subagent once", []string{agentCall, child("c1", "agent_1", "one"), child("c2", "agent_1", "two")},
			[]string{"TS", "S(Inspect translations)" + sA, "A(one)" + sA, "A(two)" + sA}},
		{"#19 D4: parent result stops, no tool-call-end; repeat gives nothing", []string{agentCall, child("c1", "agent_1", "one"),
			user("u1", bl(toolResult("agent_1", "done", false))), user("u2", bl(toolResult("agent_1", "done", false)))},
			[]string{"TS", "S(Inspect translations)" + sA, "A(one)" + sA, "P" + sA}},
		{"#20 Task chain by prompt and parentUuid", []string{taskCall, root,
			asst("c1", bl(text("child")), sc("parentUuid", "r1")...),
			asst("c2", bl(text("grandchild")), sc("parentUuid", "c1")...),
			user("u1", bl(toolResult("task_2", "result", false)))},
			[]string{"TS", "S(Search docs)" + sB, "A(Find the docs)" + sB, "A(child)" + sB, "A(grandchild)" + sB, "P" + sB}},
		{"#23 orphan chain replayed in arrival order", []string{
			child("c1", "task_2", "first"),
			asst("c2", bl(text("second")), sc("parentUuid", "c1")...),
			taskCall},
			[]string{"TS", "S(Search docs)" + sB, "A(first)" + sB, "A(second)" + sB}},
		{"#24 D11: orphan unclaimed at close is emitted without subagent", []string{
			asst("a0", bl(text("x"))), child("c1", "late", "orphan"), user("u1", "next"),
			asst("p9", bl(toolUse("late", "Task", map[string]any{"prompt": "q"})))},
			[]string{"TS", "A(x)", "A(orphan)", "TE(completed)", "U(next)", "TS"}},
		{"#24 orphan with no turn open survives a prompt", []string{
			child("c1", "late", "orphan"), user("u1", "next"),
			asst("p9", bl(toolUse("late", "Task", map[string]any{"prompt": "q"})))},
			[]string{"U(next)", "TS", "S(q)[sub=" + sub("late") + "]", "A(orphan)[sub=" + sub("late") + "]"}},
		{"#25 identical prompts matched FIFO", []string{
			asst("p1", bl(toolUse("t_a", "Task", map[string]any{"prompt": "same"}), toolUse("t_b", "Task", map[string]any{"prompt": "same"}))),
			user("r1", "same", sc()...), user("r2", "same", sc()...)},
			[]string{"TS", "S(same)[sub=" + sub("t_a") + "]", "A(same)[sub=" + sub("t_a") + "]",
				"S(same)[sub=" + sub("t_b") + "]", "A(same)[sub=" + sub("t_b") + "]"}},
		{"#26 single pending Task takes a parentless root", []string{taskCall, user("r1", "something else", sc()...)},
			[]string{"TS", "S(Search docs)" + sB, "A(something else)" + sB}},
		{"#26 two pending: no subagent", []string{taskCall,
			asst("p3", bl(toolUse("task_3", "Task", map[string]any{"prompt": "other"}))),
			user("r1", "something else", sc()...)},
			[]string{"TS", "A(something else)"}},
		{"#27 sidechain with unknown parentUuid", []string{asst("c1", bl(text("lost")), sc("parentUuid", "nowhere")...)},
			[]string{"TS", "A(lost)"}},
		{"#28 sidechain tool_result: tool-call-end, never stop", []string{taskCall, root,
			asst("c1", bl(toolUse("b1", "Bash", nil)), sc("parentUuid", "r1")...),
			user("c2", bl(toolResult("b1", "ok", false)), sc("parentUuid", "c1")...)},
			[]string{"TS", "S(Search docs)" + sB, "A(Find the docs)" + sB, "TCS(b1,Bash,Bash call,{})" + sB, "TCE(b1)" + sB + "[result=ok]"}},
		{"#29 nested Agent inside a subagent", []string{taskCall, root,
			asst("c1", bl(toolUse("inner", "Agent", map[string]any{"description": "Inner", "prompt": "deep"})), sc("parentUuid", "r1")...),
			child("i1", "inner", "inner work")},
			[]string{"TS", "S(Search docs)" + sB, "A(Find the docs)" + sB, "S(Inner)[sub=" + sub("inner") + "]", "A(inner work)[sub=" + sub("inner") + "]"}},
		{"#31 parent usage does not land on a replayed child", []string{
			child("c1", "task_2", "early"),
			asstU("p2", "m1", bl(toolUse("task_2", "Task", map[string]any{"prompt": "Find the docs"})))},
			[]string{"TS", "S(Find the docs)" + sB, "A(early)" + sB}},
		// A child read before the record that links it to its parent (a
		// subagent's transcript ahead of the main one, as the scanner can
		// read them on a loaded machine) keeps its own usage when it is
		// replayed, as it has when read after the link: live = replay.
		{"#31 a replayed child keeps its own usage", []string{
			asstU("c1", "mc", bl(text("early")), "parent_tool_use_id", "task_2", "isSidechain", true),
			asstU("p2", "m1", bl(toolUse("task_2", "Task", map[string]any{"prompt": "Find the docs"})))},
			[]string{"TS", "S(Find the docs)" + sB, "A(early)" + sB + "[usage]"}},
		{"#31 a child read after the link has its usage", []string{
			asstU("p2", "m1", bl(toolUse("task_2", "Task", map[string]any{"prompt": "Find the docs"}))),
			asstU("c1", "mc", bl(text("early")), "parent_tool_use_id", "task_2", "isSidechain", true)},
			[]string{"TS", "S(Find the docs)" + sB, "A(early)" + sB + "[usage]"}},
		{"#32 D3: no inheritance for non-sidechain records", []string{taskCall, root,
			asst("c1", bl(text("sub text")), sc("parentUuid", "r1")...),
			user("u1", bl(toolResult("task_2", "r", false)), "parentUuid", "c1"),
			asst("m1", bl(text("final answer")), "parentUuid", "c1")},
			[]string{"TS", "S(Search docs)" + sB, "A(Find the docs)" + sB, "A(sub text)" + sB, "P" + sB, "A(final answer)"}},
		{"compaction agent records are housekeeping", []string{
			user("k1", "summarize", sc("agentId", "acompact-abc")...),
			asst("k2", bl(text("summary")), sc("agentId", "acompact-abc")...)},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCase(t, tt.lines, tt.want) })
	}
}

// #21: title precedence description > title > subagent_type > prompt.
func TestSubagentTitlePrecedence(t *testing.T) {
	tests := []struct {
		input map[string]any
		want  string
	}{
		{map[string]any{"description": "D", "title": "T", "subagent_type": "S", "prompt": "P"}, "S(D)"},
		{map[string]any{"description": " ", "title": "T", "subagent_type": "S", "prompt": "P"}, "S(T)"},
		{map[string]any{"subagent_type": " S ", "prompt": "P"}, "S(S)"},
		{map[string]any{"prompt": " P "}, "S(P)"},
		{map[string]any{"prompt": "  "}, "S()"},
	}
	for _, tt := range tests {
		m := New(testSession)
		feed(t, m, asst("p", bl(toolUse("t", "Task", tt.input))))
		got := feed(t, m, child("c", "t", "x"))
		if got[0] != tt.want+"[sub="+sub("t")+"]" {
			t.Errorf("input %v: got %s want %s", tt.input, got[0], tt.want)
		}
	}
}

// #30: close with active subagents A then B stops them in order and wipes
// the maps: a late child of A is then an orphan.
func TestCloseStopsActiveSubagents(t *testing.T) {
	m := New(testSession)
	got := feed(t, m,
		asst("p", bl(toolUse("A", "Task", map[string]any{"prompt": "a"}), toolUse("B", "Task", map[string]any{"prompt": "b"}))),
		child("c1", "A", "a1"), child("c2", "B", "b1"))
	got = append(got, describeAll(m.Close(protocol.StatusCancelled))...)
	a, b := "[sub="+sub("A")+"]", "[sub="+sub("B")+"]"
	eq(t, got, "TS", "S(a)"+a, "A(a1)"+a, "S(b)"+b, "A(b1)"+b, "P"+a, "P"+b, "TE(cancelled)")
	if len(m.subs) != 0 || len(m.prompts) != 0 || len(m.uuidToSub) != 0 {
		t.Fatalf("state not wiped: %d subs %d prompts %d uuids", len(m.subs), len(m.prompts), len(m.uuidToSub))
	}
	eq(t, feed(t, m, child("c3", "A", "late")))
}

// D11: the orphan buffer is bounded.
func TestOrphanBufferBound(t *testing.T) {
	m := New(testSession)
	m.SetMaxBuffered(2)
	got := feed(t, m, child("c1", "x", "1"), child("c2", "x", "2"), child("c3", "x", "3"))
	eq(t, got, "TS", "A(3)")
	if s := m.Stats(); s.OrphansOverflow != 1 {
		t.Fatalf("stats %+v", s)
	}
	got = describeAll(m.Close(protocol.StatusCompleted))
	eq(t, got, "A(1)", "A(2)", "TE(completed)")
	if s := m.Stats(); s.OrphansFlushed != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// D13: a background Agent outlives its launch result and its turn; its stop
// comes with the task notification, which is a service envelope and not a
// user prompt.
func TestBackgroundAgent(t *testing.T) {
	s := "[sub=" + sub("toolu_bg") + "]"
	launch := asst("p1", bl(toolUse("toolu_bg", "Agent", map[string]any{"description": "Count files", "prompt": "count"})))
	rootRec := user("r1", "count", sc("agentId", "a123")...)
	asyncResult := user("u1", bl(toolResult("toolu_bg", "Async agent launched successfully.\nagentId: a123", false)),
		"toolUseResult", map[string]any{"isAsync": true, "status": "async_launched", "agentId": "a123"})
	work := asst("c1", bl(toolUse("b1", "Bash", map[string]any{"command": "ls"})), sc("agentId", "a123", "parentUuid", "att-1")...)
	workResult := user("c2", bl(toolResult("b1", "a.txt", false)), sc("agentId", "a123", "parentUuid", "c1")...)
	report := asst("c3", bl(text("3 files")), sc("agentId", "a123", "parentUuid", "att-2")...)
	notification := user("n1", "<task-notification>\n<task-id>a123</task-id>\n<tool-use-id>toolu_bg</tool-use-id>\n<status>completed</status>\n<summary>Agent \"Count files\" finished</summary>\n</task-notification>",
		"origin", map[string]any{"kind": "task-notification"})
	followUp := asst("f1", bl(text("It found 3 files.")))

	t.Run("one turn", func(t *testing.T) {
		m := New(testSession)
		got := feed(t, m, user("u0", "spawn"), launch, rootRec, asyncResult, asst("d1", bl(text("Launched."))),
			work, workResult, report, notification, followUp)
		eq(t, got, "U(spawn)", "TS", "S(Count files)"+s, "A(count)"+s, "A(Launched.)",
			`TCS(b1,Bash,Bash call,{"command":"ls"})`+s, "TCE(b1)"+s+"[result=a.txt]", "A(3 files)"+s,
			"P"+s, "SVC(Agent “Count files” completed)", "A(It found 3 files.)")
	})
	t.Run("outlives its turn", func(t *testing.T) {
		m := New(testSession)
		var envs []protocol.Envelope
		for _, l := range []string{user("u0", "spawn"), launch, rootRec, asyncResult,
			r("type", "system", "uuid", "s1", "subtype", "turn_duration"),
			work, workResult, report, notification, followUp} {
			envs = append(envs, m.Map(rec(t, l))...)
		}
		checkInvariants(t, envs)
		eq(t, describeAll(envs), "U(spawn)", "TS", "S(Count files)"+s, "A(count)"+s, "TE(completed)",
			"TS", `TCS(b1,Bash,Bash call,{"command":"ls"})`+s, "TCE(b1)"+s+"[result=a.txt]", "A(3 files)"+s,
			"P"+s, "SVC(Agent “Count files” completed)", "A(It found 3 files.)")
	})
	t.Run("linked by the launch result when the root does not match", func(t *testing.T) {
		m := New(testSession)
		odd := user("r1", "a prompt rewritten by Claude", sc("agentId", "a123", "parentUuid", "x")...)
		got := feed(t, m, launch, odd, asyncResult, report)
		eq(t, got, "TS", "S(Count files)"+s, "A(a prompt rewritten by Claude)"+s, "A(3 files)"+s)
	})
	t.Run("unlinked agent keeps a subagent of its own at close", func(t *testing.T) {
		m := New(testSession)
		own := "[sub=" + sub("agent:zzz") + "]"
		got := feed(t, m, asst("a0", bl(text("x"))), asst("c1", bl(text("stray")), sc("agentId", "zzz", "parentUuid", "q")...))
		got = append(got, describeAll(m.Close(protocol.StatusCompleted))...)
		eq(t, got, "TS", "A(x)", "S()"+own, "A(stray)"+own, "P"+own, "TE(completed)")
	})
	t.Run("notification is not a prompt and opens a turn of its own", func(t *testing.T) {
		m := New(testSession)
		got := feed(t, m, notification, followUp)
		eq(t, got, "TS", `SVC(Agent "Count files" finished)`, "A(It found 3 files.)")
	})
}

// Synchronous subagent: the parent result with agentId stops it.
func TestForegroundAgentStopsOnResult(t *testing.T) {
	s := "[sub=" + sub("fg") + "]"
	m := New(testSession)
	got := feed(t, m,
		asst("p", bl(toolUse("fg", "Agent", map[string]any{"description": "FG", "prompt": "do", "run_in_background": false}))),
		user("r", "do", sc("agentId", "a9")...),
		user("u", bl(toolResult("fg", "[Subagent hand-back] done", false)), "toolUseResult", map[string]any{"agentId": "a9", "status": "completed"}),
		asst("m", bl(text("ok"))))
	eq(t, got, "TS", "S(FG)"+s, "A(do)"+s, "P"+s, "A(ok)")
}
