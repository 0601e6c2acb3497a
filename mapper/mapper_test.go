package mapper

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// r builds a record line from key/value pairs.
func r(kv ...any) string {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func msg(role string, content any, extra ...any) map[string]any {
	m := map[string]any{"role": role, "content": content}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func text(s string) map[string]any     { return map[string]any{"type": "text", "text": s} }
func thinking(s string) map[string]any { return map[string]any{"type": "thinking", "thinking": s} }
func toolUse(id, name string, input any) map[string]any {
	b := map[string]any{"type": "tool_use", "id": id, "name": name}
	if input != nil {
		b["input"] = input
	}
	return b
}
func toolResult(id string, content any, isErr bool) map[string]any {
	return map[string]any{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isErr}
}

var usage = map[string]any{"input_tokens": 10, "output_tokens": 5}

func user(uuid string, content any, kv ...any) string {
	return r(append([]any{"type", "user", "uuid", uuid, "message", msg("user", content)}, kv...)...)
}
func asst(uuid string, blocks []any, kv ...any) string {
	return r(append([]any{"type", "assistant", "uuid", uuid, "message", msg("assistant", blocks)}, kv...)...)
}
func asstU(uuid, msgID string, blocks []any, kv ...any) string {
	return r(append([]any{"type", "assistant", "uuid", uuid, "message", msg("assistant", blocks, "id", msgID, "usage", usage)}, kv...)...)
}

func bl(b ...any) []any { return b }

// §8.2 mapper basics (reference-behavior §2), with decisions where they
// change the expected output.
func TestBasics(t *testing.T) {
	long := strings.Repeat("d", 100)
	exact80 := strings.Repeat("e", 80)
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"#6 string prompt, no turn", []string{user("u1", "say lol")}, []string{"U(say lol)"}},
		{"#7 text+thinking, usage on the last", []string{asstU("a1", "m1", bl(text("hi"), thinking("hmm")))},
			[]string{"TS", "A(hi)", "A(hmm)[thinking][usage]"}},
		{"#8 hidden Task only, usage dropped", []string{asstU("a1", "m1", bl(toolUse("t1", "Task", map[string]any{"prompt": "p"})))},
			[]string{"TS"}},
		{"#9 assistant without message", []string{r("type", "assistant", "uuid", "a1")}, []string{"TS"}},
		{"#10 Bash tool_use", []string{asst("a1", bl(toolUse("t1", "Bash", map[string]any{"command": "ls"})))},
			[]string{"TS", `TCS(t1,Bash,Bash call,{"command":"ls"})`}},
		{"#10 description 100 chars cut", []string{asst("a1", bl(toolUse("t1", "Bash", map[string]any{"description": long})))},
			[]string{"TS", `TCS(t1,Bash,` + long[:77] + `...,{"description":"` + long + `"})`}},
		{"#10 description of 80 kept", []string{asst("a1", bl(toolUse("t1", "Bash", map[string]any{"description": exact80})))},
			[]string{"TS", `TCS(t1,Bash,` + exact80 + `,{"description":"` + exact80 + `"})`}},
		{"#10 blank description", []string{asst("a1", bl(toolUse("t1", "Bash", map[string]any{"description": "  "})))},
			[]string{"TS", `TCS(t1,Bash,Bash call,{"description":"  "})`}},
		{"#10 input null", []string{`{"type":"assistant","uuid":"a1","message":{"content":[{"type":"tool_use","id":"t1","name":"X","input":null}]}}`},
			[]string{"TS", `TCS(t1,X,X call,{"input":null})`}},
		{"#10 input array", []string{asst("a1", bl(toolUse("t1", "X", []string{"a"})))},
			[]string{"TS", `TCS(t1,X,X call,{"input":["a"]})`}},
		{"#10 missing input", []string{asst("a1", bl(toolUse("t1", "X", nil)))},
			[]string{"TS", `TCS(t1,X,X call,{})`}},
		{"#10 missing name", []string{asst("a1", bl(toolUse("t1", "", nil)))},
			[]string{"TS", `TCS(t1,unknown,unknown call,{})`}},
		{"#11 tool_result (D8 result, error)", []string{
			asst("a1", bl(toolUse("t1", "Bash", nil), toolUse("t2", "Bash", nil))),
			user("u2", bl(toolResult("t1", "out", false))),
			user("u3", bl(toolResult("t2", "bad", true)))},
			[]string{"TS", `TCS(t1,Bash,Bash call,{})`, `TCS(t2,Bash,Bash call,{})`, "TCE(t1)[result=out]", "TCE(t2)[err][result=bad]"}},
		{"one end per call: a second result is dropped", []string{
			asst("a1", bl(toolUse("t1", "Bash", nil))),
			user("u2", bl(toolResult("t1", "out", false))),
			user("u3", bl(toolResult("t1", "bad", true)))},
			[]string{"TS", `TCS(t1,Bash,Bash call,{})`, "TCE(t1)[result=out]"}},
		{"#12 text+image closes turn", []string{
			asst("a1", bl(text("x"))),
			user("u1", bl(text("look"), map[string]any{"type": "image", "source": map[string]any{}}))},
			[]string{"TS", "A(x)", "TE(completed)", "U(look)"}},
		{"#12 only image closes turn", []string{
			asst("a1", bl(text("x"))),
			user("u1", bl(map[string]any{"type": "image"}))},
			[]string{"TS", "A(x)", "TE(completed)"}},
		{"#12 empty array: nothing", []string{asst("a1", bl(text("x"))), user("u1", bl())},
			[]string{"TS", "A(x)"}},
		{"#13 tool_result + text", []string{user("u1", bl(toolResult("t9", "", false), text("note")))},
			[]string{"TS", "TCE(t9)", "A(note)"}},
		{"#14 isMeta user string", []string{asst("a1", bl(text("x"))), user("u1", "ctx", "isMeta", true)},
			[]string{"TS", "A(x)"}},
		{"#15 summary, system, compact summary", []string{
			asst("a1", bl(text("x"))),
			r("type", "summary", "summary", "s", "leafUuid", "l"),
			r("type", "system", "uuid", "s1", "subtype", "local_command"),
			asst("a2", bl(text("compacted")), "isCompactSummary", true),
			user("u2", "summary of before", "isCompactSummary", true)},
			[]string{"TS", "A(x)"}},
		{"#16 second prompt closes", []string{user("u1", "a"), asst("a1", bl(text("x"))), user("u2", "b")},
			[]string{"U(a)", "TS", "A(x)", "TE(completed)", "U(b)"}},
		{"unknown record and block types ignored", []string{
			r("type", "progress", "uuid", "p1"),
			asst("a1", bl(map[string]any{"type": "redacted_thinking"}, map[string]any{"type": "server_tool_use"}, text("y")))},
			[]string{"TS", "A(y)"}},
		{"empty assistant text kept", []string{asst("a1", bl(text("")))}, []string{"TS", "A()"}},
		{"empty string prompt kept", []string{user("u1", "")}, []string{"U()"}},
		{"D15 turn_duration closes the turn", []string{
			asst("a1", bl(text("x"))), r("type", "system", "uuid", "s1", "subtype", "turn_duration"), user("u2", "next")},
			[]string{"TS", "A(x)", "TE(completed)", "U(next)"}},
		{"D16 interrupt marker cancels the turn", []string{
			asst("a1", bl(toolUse("t1", "Write", nil))),
			user("u2", bl(toolResult("t1", "Permission prompt was aborted.", true))),
			user("u3", bl(text("[Request interrupted by user for tool use]")))},
			[]string{"TS", "TCS(t1,Write,Write call,{})", "TCE(t1)[err][result=Permission prompt was aborted.]",
				"SVC(Interrupted by user)", "TE(cancelled)"}},
		{"D16 string interrupt marker", []string{asst("a1", bl(text("x"))), user("u2", "[Request interrupted by user]")},
			[]string{"TS", "A(x)", "SVC(Interrupted by user)", "TE(cancelled)"}},
		{"D16 interrupt with no open turn: nothing", []string{user("u2", "[Request interrupted by user]")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCase(t, tt.lines, tt.want) })
	}
}

func TestClaudeUUIDOnTextEnvelopes(t *testing.T) {
	m := New(testSession)
	envs := m.Map(rec(t, user("u-1", "hello")))
	if len(envs) != 1 || envs[0].ClaudeUUID != "u-1" || envs[0].Turn != "" || m.Turn() != "" {
		t.Fatalf("got %+v", envs)
	}
	envs = m.Map(rec(t, asst("a-1", bl(text("x"), toolUse("t1", "Bash", nil)))))
	if envs[1].ClaudeUUID != "a-1" || envs[2].ClaudeUUID != "" {
		t.Fatalf("claudeUuid on text only: %+v", envs)
	}
}

func TestToolCallWithoutIDGetsDerivedID(t *testing.T) {
	line := `{"type":"assistant","uuid":"a1","message":{"content":[{"type":"tool_use","name":"Bash","input":{}}]}}`
	a := New(testSession).Map(rec(t, line))
	b := New(testSession).Map(rec(t, line))
	if a[1].Ev.Call == "" || !protocol.IsCuid(a[1].Ev.Call) || a[1].Ev.Call != b[1].Ev.Call {
		t.Fatalf("call ids %q %q", a[1].Ev.Call, b[1].Ev.Call)
	}
}

// #16 and reference-behavior §2.8: Close with nothing open is a no-op.
func TestCloseNothingOpen(t *testing.T) {
	m := New(testSession)
	if got := m.Close(protocol.StatusCancelled); len(got) != 0 {
		t.Fatalf("Close with no turn = %v", describeAll(got))
	}
	feed(t, m, asst("a1", bl(text("x"))))
	eq(t, describeAll(m.Close(protocol.StatusCancelled)), "TE(cancelled)")
	if m.Turn() != "" {
		t.Fatal("turn still open after Close")
	}
	if got := m.Close(protocol.StatusCompleted); len(got) != 0 {
		t.Fatal("second Close emitted")
	}
}

// D6: usage at most once per API message id, even when Claude writes one
// line per content block with the same usage.
func TestUsageOncePerMessage(t *testing.T) {
	m := New(testSession)
	got := feed(t, m,
		asstU("a1", "msg_1", bl(text("one"))),
		asstU("a2", "msg_1", bl(toolUse("t1", "Bash", nil))),
		asstU("a3", "msg_2", bl(text("two"))))
	eq(t, got, "TS", "A(one)[usage]", "TCS(t1,Bash,Bash call,{})", "A(two)[usage]")
}

func TestMalformedUsageDropsUsageKeepsRecord(t *testing.T) {
	line := `{"type":"assistant","uuid":"a1","message":{"id":"m","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":"lots"}}}`
	eq(t, feed(t, New(testSession), line), "TS", "A(x)")
	nullTier := `{"type":"assistant","uuid":"a1","message":{"id":"m","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":0,"output_tokens":0,"service_tier":null}}}`
	envs := New(testSession).Map(rec(t, nullTier))
	if envs[1].Usage == nil || envs[1].Usage.ServiceTier != "" {
		t.Fatalf("usage %+v", envs[1].Usage)
	}
}

// Seed 002 example 1: remote normal turn.
func TestSeedExample1(t *testing.T) {
	m := New(testSession)
	got := feed(t, m,
		`{"type":"assistant","uuid":"a1","message":{"role":"assistant","content":[{"type":"text","text":"I will inspect auth files."}]}}`,
		`{"type":"assistant","uuid":"a2","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"rg auth src"}}]}}`,
		`{"type":"user","uuid":"u1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"src/auth/index.ts"}]}}`)
	got = append(got, describeAll(m.Close(protocol.StatusCompleted))...)
	eq(t, got, "TS", "A(I will inspect auth files.)", `TCS(toolu_1,Bash,Bash call,{"command":"rg auth src"})`,
		"TCE(toolu_1)[result=src/auth/index.ts]", "TE(completed)")
}

// Seed 002 example 2: a sidechain message carries the subagent cuid2, never
// the provider id.
func TestSeedExample2(t *testing.T) {
	m := New(testSession)
	got := feed(t, m,
		asst("a0", bl(toolUse("toolu_task_1", "Task", map[string]any{"prompt": "go", "description": "Look"}))),
		`{"type":"assistant","uuid":"a1","parent_tool_use_id":"toolu_task_1","message":{"role":"assistant","content":[{"type":"text","text":"Subagent: found 3 files."}]}}`)
	s := "[sub=" + sub("toolu_task_1") + "]"
	eq(t, got, "TS", "S(Look)"+s, "A(Subagent: found 3 files.)"+s)
	if sub("toolu_task_1") != "cdbc6ff5ad64b06ccfa061c7" {
		t.Fatal("vector changed")
	}
}

// Seed 002 example 3 and §8.3 #22: orphan child before its parent.
func TestSeedExample3Orphan(t *testing.T) {
	child := `{"type":"assistant","uuid":"c1","parent_tool_use_id":"toolu_late","message":{"role":"assistant","content":[{"type":"text","text":"child before parent"}]}}`
	s := "[sub=" + sub("toolu_late") + "]"
	for _, tool := range []string{"Task", "Agent"} {
		t.Run(tool, func(t *testing.T) {
			m := New(testSession)
			eq(t, feed(t, m, child)) // buffered: nothing, not even turn-start
			got := feed(t, m, asst("p1", bl(toolUse("toolu_late", tool, map[string]any{"prompt": "Inspect auth flow"}))))
			// D4: Agent follows the Task rule, no tool-call-start.
			eq(t, got, "TS", "S(Inspect auth flow)"+s, "A(child before parent)"+s)
		})
	}
}

// Seed 002 example 4 (restart dedupe) is upstream of the mapper: see
// claude.TestKeysAndDedupe and cmd/ccrelay TestReplaySkipsAndExplicitFiles.

// Seed 002 example 5 with D7: abort while a sidechain tool runs; the
// interrupted result and the stop come before turn-end(cancelled).
func TestSeedExample5Abort(t *testing.T) {
	m := New(testSession)
	s := "[sub=" + sub("toolu_task_1") + "]"
	got := feed(t, m,
		asst("a0", bl(toolUse("toolu_task_1", "Task", map[string]any{"prompt": "p"}))),
		`{"type":"assistant","uuid":"c1","isSidechain":true,"parent_tool_use_id":"toolu_task_1","message":{"content":[{"type":"tool_use","id":"toolu_sc_1","name":"Bash","input":{}}]}}`,
		`{"type":"user","uuid":"c2","isSidechain":true,"parent_tool_use_id":"toolu_task_1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_sc_1","is_error":true,"content":"[Request interrupted by user for tool use]"}]}}`)
	got = append(got, describeAll(m.Close(protocol.StatusCancelled))...)
	eq(t, got, "TS", "S(p)"+s, "TCS(toolu_sc_1,Bash,Bash call,{})"+s,
		"TCE(toolu_sc_1)"+s+"[err][result=[Request interrupted by user for tool use]]", "P"+s, "TE(cancelled)")
}

// A mapper makes its maps when it first uses them: a new one is a single
// allocation (it made nine maps, and six more at every turn's end), so a
// short session costs little to map.
func TestNewMapperAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { New("s") }); n > 1 {
		t.Errorf("New: %.0f allocations, want 1", n)
	}
	m := New("s")
	text := "hello"
	m.Map(&claude.Record{Type: claude.TypeUser, UUID: "u1", Timestamp: 1, Message: &claude.Message{Role: "user", Content: claude.Content{Present: true, IsString: true, String: "hi"}}})
	m.Map(&claude.Record{Type: claude.TypeAssistant, UUID: "a1", ParentUUID: "u1", Timestamp: 2, Message: &claude.Message{ID: "m1", Role: "assistant",
		Content: claude.Content{Present: true, Blocks: []claude.Block{{Type: "text", Text: &text}}}}})
	if env := m.Close(protocol.StatusCompleted); len(env) == 0 {
		t.Fatal("no turn to close")
	}
	if m.subs != nil || m.prompts != nil || m.buffered != nil || m.usageSeen != nil {
		t.Error("a turn without subagents or usage left maps made")
	}
}

// MapShort gives what Map gives, in the mapper's own slice (reused by the
// next call) rather than a copy of it.
func TestMapShortIsMap(t *testing.T) {
	text := "hello"
	recs := []*claude.Record{
		{Type: claude.TypeUser, UUID: "u1", Timestamp: 1, Message: &claude.Message{Role: "user", Content: claude.Content{Present: true, IsString: true, String: "hi"}}},
		{Type: claude.TypeAssistant, UUID: "a1", ParentUUID: "u1", Timestamp: 2, Message: &claude.Message{ID: "m1", Role: "assistant",
			Content: claude.Content{Present: true, Blocks: []claude.Block{{Type: "text", Text: &text}}}, Usage: []byte(`{"input_tokens":1,"output_tokens":2}`)}},
		{Type: claude.TypeAssistant, UUID: "a2", ParentUUID: "a1", Timestamp: 3, Message: &claude.Message{ID: "m2", Role: "assistant",
			Content: claude.Content{Present: true, Blocks: []claude.Block{{Type: "text", Text: &text}}}}},
	}
	m1, m2 := New("s"), New("s")
	var prev []protocol.Envelope
	reused := 0
	for i, r := range recs {
		want := m1.Map(r)
		got := m2.MapShort(r)
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d: MapShort %+v, Map %+v", i, got, want)
		}
		if prev != nil && len(got) <= cap(prev) {
			if &got[0] != &prev[:1][0] {
				t.Errorf("record %d: MapShort's envelopes were copied", i)
			}
			reused++
		}
		prev = got
	}
	if reused == 0 {
		t.Fatal("no call could reuse the slice")
	}
}

// A tool call's subagent id is hashed only when an envelope needs it: a
// plain call, which most are, costs no SHA-256 of its id; a call whose
// sidechain shows gets the id SubagentID gives.
func TestToolCallSubagentIDLazy(t *testing.T) {
	m := New("s")
	m.Map(&claude.Record{Type: claude.TypeUser, UUID: "u1", Timestamp: 1, Message: &claude.Message{Role: "user", Content: claude.Content{Present: true, IsString: true, String: "hi"}}})
	m.Map(&claude.Record{Type: claude.TypeAssistant, UUID: "a1", ParentUUID: "u1", Timestamp: 2, Message: &claude.Message{ID: "m1", Role: "assistant",
		Content: claude.Content{Present: true, Blocks: []claude.Block{{Type: "tool_use", ID: "toolu_1", Name: "Bash", Input: []byte(`{"command":"ls"}`)}}}}})
	s := m.subs["toolu_1"]
	if s == nil || s.sidMade != "" {
		t.Fatalf("the plain call's subagent: %+v", s)
	}
	if got, want := s.sid(), protocol.SubagentID("toolu_1"); got != want {
		t.Fatalf("sid %q, want %q", got, want)
	}
}
