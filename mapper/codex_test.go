package mapper

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

const cxThread = "01a21db0-15a3-79c2-bd43-d66cd47ec9ef"

// cx builds rollout lines: each call adds one with the next ordinal.
type cx struct {
	t     *testing.T
	lines []*codex.Record
}

func (b *cx) add(typ string, payload any) *cx {
	b.t.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		b.t.Fatal(err)
	}
	line := fmt.Sprintf(`{"timestamp":"2026-11-27T15:46:%02d.000Z","ordinal":%d,"type":%q,"payload":%s}`, len(b.lines)%60, len(b.lines), typ, p)
	r, err := codex.Parse([]byte(line))
	if err != nil {
		b.t.Fatalf("%s: %v", line, err)
	}
	b.lines = append(b.lines, r)
	return b
}

type obj = map[string]any

func (b *cx) started(turn string) *cx {
	return b.add("event_msg", obj{"type": "task_started", "turn_id": turn, "model_context_window": 1000})
}
func (b *cx) prompt(turn, id, text string) *cx {
	return b.add("event_msg", obj{"type": "item_completed", "turn_id": turn, "item": obj{"type": "UserMessage", "id": id, "content": []obj{{"type": "text", "text": text}}}})
}
func (b *cx) said(turn, id, text string) *cx {
	return b.add("event_msg", obj{"type": "item_completed", "turn_id": turn, "item": obj{"type": "AgentMessage", "id": id, "content": []obj{{"type": "Text", "text": text}}}}).
		add("response_item", obj{"type": "message", "id": id, "role": "assistant", "content": []obj{{"type": "output_text", "text": text}}})
}
func (b *cx) shell(call, cmd string) *cx {
	args, _ := json.Marshal(obj{"cmd": cmd, "yield_time_ms": 10000})
	return b.add("response_item", obj{"type": "function_call", "name": "exec_command", "arguments": string(args), "call_id": call})
}
func (b *cx) usage(in, cached, out int64) *cx {
	return b.add("token_usage_record", obj{"response_id": "r", "usage": obj{"input_tokens": in, "cached_input_tokens": cached, "output_tokens": out, "reasoning_output_tokens": 2}})
}
func (b *cx) output(call, text string) *cx {
	return b.add("response_item", obj{"type": "function_call_output", "call_id": call, "output": text})
}
func (b *cx) complete(turn string) *cx {
	return b.add("event_msg", obj{"type": "task_complete", "turn_id": turn})
}

// run maps the lines one Map at a time, as a follower of the rollout
// does, and returns what each line produced.
func (b *cx) run() (*Codex, [][]protocol.Envelope) {
	c := NewCodex(cxThread)
	var per [][]protocol.Envelope
	for _, r := range b.lines {
		envs := c.Map(r)
		for i := range envs {
			if err := envs[i].Validate(); err != nil {
				b.t.Fatalf("invalid envelope %+v: %v", envs[i], err)
			}
		}
		per = append(per, envs)
	}
	return c, per
}

func flat(per [][]protocol.Envelope) []protocol.Envelope {
	var out []protocol.Envelope
	for _, p := range per {
		out = append(out, p...)
	}
	return out
}

// kinds describes envelopes briefly: "t" of each, with the text or the
// result for text, service and tool-call-end.
func kinds(envs []protocol.Envelope) string {
	var parts []string
	for _, e := range envs {
		s := string(e.Ev.T)
		switch e.Ev.T {
		case protocol.KindText, protocol.KindService:
			s += ":" + e.Ev.Text
			if e.Ev.Thinking {
				s += "(thinking)"
			}
		case protocol.KindToolCallStart:
			s += ":" + e.Ev.Name
		case protocol.KindToolCallEnd:
			if e.Ev.Error {
				s += "(error)"
			}
			if e.Ev.Result != nil {
				s += ":" + *e.Ev.Result
			}
		case protocol.KindTurnEnd:
			s += ":" + string(e.Ev.Status)
		}
		if e.Usage != nil {
			s += "+usage"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}

// TestCodexRules: a table of rollouts and the envelopes each maps to.
func TestCodexRules(t *testing.T) {
	const T1, T2 = "01a21db0-0000-7000-8000-000000000001", "01a21db0-0000-7000-8000-000000000002"
	for _, tc := range []struct {
		name  string
		build func(b *cx)
		want  string
	}{
		{"text with reasoning, usage on the last envelope of the response", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "hi").
				add("event_msg", obj{"type": "item_completed", "turn_id": T1, "item": obj{"type": "Reasoning", "id": "rs_1", "summary_text": []string{"**A**", "b"}}}).
				add("response_item", obj{"type": "reasoning", "id": "rs_1", "summary": []obj{{"type": "summary_text", "text": "**A**"}}, "encrypted_content": "gAAAA"}).
				said(T1, "msg_1", "hello").usage(100, 40, 7).complete(T1)
		}, "text:hi | turn-start | text:**A**\n\nb(thinking) | text:hello+usage | turn-end:completed"},
		{"developer messages, environment context and the response_item prompt are not shown", func(b *cx) {
			b.started(T1).
				add("response_item", obj{"type": "message", "role": "developer", "content": []obj{{"type": "input_text", "text": "<permissions>"}}}).
				add("response_item", obj{"type": "message", "role": "user", "content": []obj{{"type": "input_text", "text": "<environment_context>x</environment_context>"}}}).
				add("world_state", obj{"x": 1}).
				add("response_item", obj{"type": "message", "role": "user", "content": []obj{{"type": "input_text", "text": "hi"}}}).
				prompt(T1, "u1", "hi").said(T1, "msg_1", "yo").usage(10, 0, 1).complete(T1)
		}, "text:hi | turn-start | text:yo+usage | turn-end:completed"},
		{"a shell command: its output from CommandExecution, exit 0", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "ls").usage(10, 0, 1).
				add("event_msg", obj{"type": "item_completed", "turn_id": T1, "item": obj{"type": "CommandExecution", "id": "call_1", "command": []string{"bash", "-lc", "ls"}, "status": "completed", "aggregated_output": "a\nb\n", "exit_code": 0}}).
				output("call_1", "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\na\nb\n").complete(T1)
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end:a\nb\n | turn-end:completed"},
		{"a failed command says its exit code and is an error", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "false").usage(10, 0, 1).
				add("event_msg", obj{"type": "item_completed", "turn_id": T1, "item": obj{"type": "CommandExecution", "id": "call_1", "status": "failed", "aggregated_output": "boom\n", "exit_code": 3}}).
				output("call_1", "Chunk ID: 1\nProcess exited with code 3\nOutput:\nboom\n").complete(T1)
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end(error):Exit code 3\nboom\n | turn-end:completed"},
		{"without CommandExecution the exit code comes from the output's header", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "false").usage(10, 0, 1).
				output("call_1", "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 2\nOutput:\nno\n").complete(T1)
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end(error):Exit code 2\nno\n | turn-end:completed"},
		{"a declined command (no CommandExecution, Codex's own words) is an error", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "rm -rf x").usage(10, 0, 1).
				output("call_1", "exec command rejected by user").complete(T1)
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end(error):exec command rejected by user | turn-end:completed"},
		{"a command that yields runs on: not an error", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "sleep 30").usage(10, 0, 1).
				output("call_1", "Chunk ID: 1\nWall time: 10.0 seconds\nProcess running with session ID 7\nOriginal token count: 0\nOutput:\n").complete(T1)
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end:\n[Process running with session ID 7] | turn-end:completed"},
		{"a call ends once", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "ls").usage(10, 0, 1).
				output("call_1", "Process exited with code 0\nOutput:\nx").output("call_1", "Process exited with code 0\nOutput:\nx").complete(T1)
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end:x | turn-end:completed"},
		{"other tools keep their name and arguments", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").
				add("response_item", obj{"type": "function_call", "name": "spawn_agent", "namespace": "multi_agent_v1", "arguments": `{"message":"look"}`, "call_id": "call_9"}).
				usage(10, 0, 1).output("call_9", "agent started").complete(T1)
		}, "text:run | turn-start | tool-call-start:multi_agent_v1.spawn_agent+usage | tool-call-end:agent started | turn-end:completed"},
		{"interrupted: the open call ends with an error, a note, cancelled", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "sleep 99").usage(10, 0, 1).
				add("event_msg", obj{"type": "turn_aborted", "turn_id": T1, "reason": "interrupted"}).
				add("response_item", obj{"type": "message", "role": "user", "content": []obj{{"type": "input_text", "text": "<turn_aborted>\nThe user interrupted\n</turn_aborted>"}}})
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end(error):" + CodexAbortResult + " | service:Interrupted by user | turn-end:cancelled"},
		{"interrupted before the response's usage: its text goes out without it", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").
				add("event_msg", obj{"type": "item_completed", "turn_id": T1, "item": obj{"type": "Reasoning", "id": "rs_1", "summary_text": []string{"hmm"}}}).
				add("event_msg", obj{"type": "turn_aborted", "turn_id": T1, "reason": "interrupted"})
		}, "text:run | turn-start | text:hmm(thinking) | service:Interrupted by user | turn-end:cancelled"},
		{"another abort reason is said", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").add("event_msg", obj{"type": "turn_aborted", "turn_id": T1, "reason": "replaced"})
		}, "text:run | turn-start | service:Turn aborted (replaced) | turn-end:cancelled"},
		{"a failed turn says why and ends failed", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").
				add("event_msg", obj{"type": "task_complete", "turn_id": T1, "error": obj{"message": `{"error":{"message":"quota exceeded"}}`}})
		}, "text:run | turn-start | service:Codex error: quota exceeded | turn-end:failed"},
		{"a turn Codex left open is cut when the next starts", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "run").shell("call_1", "ls").usage(10, 0, 1).
				started(T2).prompt(T2, "u2", "again").said(T2, "m2", "ok").usage(10, 0, 1).complete(T2)
		}, "text:run | turn-start | tool-call-start:Bash+usage | tool-call-end(error):" + CodexCutResult + " | service:" + CodexCutNote + " | turn-end:failed | text:again | turn-start | text:ok+usage | turn-end:completed"},
		{"a model change is said when the next turn opens", func(b *cx) {
			b.started(T1).add("turn_context", obj{"turn_id": T1, "model": "gpt-5.5"}).prompt(T1, "u1", "a").said(T1, "m1", "x").usage(1, 0, 1).complete(T1).
				started(T2).add("turn_context", obj{"turn_id": T2, "model": "gpt-5.4"}).prompt(T2, "u2", "b").said(T2, "m2", "y").usage(1, 0, 1).complete(T2)
		}, "text:a | turn-start | text:x+usage | turn-end:completed | text:b | turn-start | service:Model changed to gpt-5.4 | text:y+usage | turn-end:completed"},
		{"error and warning events are notes", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "a").add("event_msg", obj{"type": "warning", "message": "model metadata not found"}).
				add("event_msg", obj{"type": "error", "message": "stream disconnected"}).complete(T1)
		}, "text:a | turn-start | service:Codex warning: model metadata not found | service:Codex error: stream disconnected | turn-end:completed"},
		{"unknown record types and event kinds are ignored", func(b *cx) {
			b.started(T1).prompt(T1, "u1", "a").add("future_record", obj{"x": 1}).
				add("event_msg", obj{"type": "future_event", "x": 1}).add("response_item", obj{"type": "future_item"}).
				said(T1, "m1", "x").usage(1, 0, 1).complete(T1)
		}, "text:a | turn-start | text:x+usage | turn-end:completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &cx{t: t}
			tc.build(b)
			c, per := b.run()
			got := kinds(append(flat(per), c.Flush()...))
			if got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCodexUsage: the Responses API counts cached input inside
// input_tokens; the protocol's input_tokens leaves it out, so that the
// context in use (input + cache read + cache creation) is Codex's input.
func TestCodexUsage(t *testing.T) {
	b := &cx{t: t}
	b.started("t1").prompt("t1", "u", "hi").said("t1", "m", "yo").usage(1000, 400, 30).complete("t1")
	_, per := b.run()
	var u *protocol.Usage
	for _, e := range flat(per) {
		if e.Usage != nil {
			u = e.Usage
		}
	}
	if u == nil {
		t.Fatal("no usage")
	}
	if u.InputTokens != 600 || *u.CacheReadInputTokens != 400 || *u.CacheCreationInputTokens != 0 || u.OutputTokens != 30 ||
		u.ContextWindow == nil || *u.ContextWindow != 1000 || string(u.Extra["reasoning_output_tokens"]) != "2" {
		t.Fatalf("usage %+v", u)
	}
}

// TestCodexHold: a response's envelopes wait for its usage record, which
// follows at once in the rollout; the turn's start does not wait.
func TestCodexHold(t *testing.T) {
	b := &cx{t: t}
	b.started("t1").prompt("t1", "u", "hi").said("t1", "m", "yo")
	c, per := b.run()
	if kinds(flat(per)) != "text:hi | turn-start" {
		t.Fatalf("before the usage record: %s", kinds(flat(per)))
	}
	u := &cx{t: t}
	u.usage(5, 0, 1)
	got := c.Map(u.lines[0])
	if kinds(got) != "text:yo+usage" {
		t.Fatalf("at the usage record: %s", kinds(got))
	}
	if got := c.Flush(); got != nil {
		t.Fatalf("Flush after release: %s", kinds(got))
	}
}

// TestCodexPatch: apply_patch's diff comes from the FileChange item with
// its line numbers; a refused patch has none and is an error.
func TestCodexPatch(t *testing.T) {
	patch := "*** Begin Patch\n*** Delete File: old.txt\n*** Add File: new.txt\n+one\n+two\n*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch\n"
	call := func(b *cx) *cx {
		return b.started("t1").prompt("t1", "u", "edit").
			add("response_item", obj{"type": "custom_tool_call", "name": "apply_patch", "input": patch, "call_id": "call_p"}).usage(1, 0, 1)
	}
	b := call(&cx{t: t})
	b.add("event_msg", obj{"type": "item_completed", "turn_id": "t1", "item": obj{"type": "FileChange", "id": "call_p", "status": "completed",
		"stdout":  "Success. Updated the following files:\nD old.txt\nA new.txt\nM a.txt\n",
		"changes": obj{"/p/a.txt": obj{"type": "update", "unified_diff": "@@ -4 +4 @@\n-x\n+y\n"}, "/p/old.txt": obj{"type": "delete", "content": "gone\n"}, "/p/new.txt": obj{"type": "add", "content": "one\ntwo\n"}}}}).
		add("response_item", obj{"type": "custom_tool_call_output", "call_id": "call_p", "output": "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess.\n"}).complete("t1")
	_, per := b.run()
	envs := flat(per)
	var start, end *protocol.Event
	for i := range envs {
		switch envs[i].Ev.T {
		case protocol.KindToolCallStart:
			start = &envs[i].Ev
		case protocol.KindToolCallEnd:
			end = &envs[i].Ev
		}
	}
	if start == nil || start.Name != "apply_patch" || start.Title != "Edit 3 files" || !strings.Contains(string(start.Args), `"input":"*** Begin Patch`) {
		t.Fatalf("start %+v", start)
	}
	if end == nil || end.Error || end.Diff == nil {
		t.Fatalf("end %+v", end)
	}
	// The first change the protocol can show, in the patch's order: the
	// added file (the deleted one has no diff of its own), numbered from 1.
	d := end.Diff
	if d.Path != "/p/new.txt" || d.Op != protocol.DiffCreate || len(d.Hunks) != 1 || d.Hunks[0].NewStart != 1 || d.Hunks[0].NewLines != 2 ||
		strings.Join(d.Hunks[0].Lines, ",") != "+one,+two" {
		t.Fatalf("diff %+v", d)
	}
	if !strings.HasPrefix(*end.Result, "Success. Updated the following files:") {
		t.Fatalf("result %q", *end.Result)
	}

	var hd protocol.Diff
	if !unifiedHunks(&hd, "--- a\n+++ b\n@@ -1,2 +1,3 @@ func\n a\n-b\n+B\n+c\n\\ No newline at end of file\n@@ -10 +11,0 @@\n-z\n") {
		t.Fatal("no hunks")
	}
	want := []protocol.Hunk{{OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 3, Lines: []string{" a", "-b", "+B", "+c"}},
		{OldStart: 10, OldLines: 1, NewStart: 11, NewLines: 0, Lines: []string{"-z"}}}
	if fmt.Sprint(hd.Hunks) != fmt.Sprint(want) {
		t.Fatalf("hunks %+v", hd.Hunks)
	}

	r := call(&cx{t: t})
	r.add("response_item", obj{"type": "custom_tool_call_output", "call_id": "call_p", "output": "patch rejected: writing is blocked by read-only sandbox"}).complete("t1")
	_, per = r.run()
	for _, e := range flat(per) {
		if e.Ev.T == protocol.KindToolCallEnd && (!e.Ev.Error || e.Ev.Diff != nil) {
			t.Fatalf("a refused patch: %+v", e.Ev)
		}
	}
}

// TestCodexIDs: ids come from the thread, Codex's turn ids and the items'
// own ids, not from where a line stands in the file: a rollout with other
// lines between gives the same envelopes (remote mode, which sees the
// same items through app-server and no ordinals, derives the same ids).
func TestCodexIDs(t *testing.T) {
	mk := func(extra bool) []protocol.Envelope {
		b := &cx{t: t}
		b.started("t1")
		if extra {
			b.add("world_state", obj{}).add("event_msg", obj{"type": "thread_settings_applied"})
		}
		b.prompt("t1", "u1", "run").shell("call_1", "ls").usage(10, 0, 1)
		if extra {
			b.add("event_msg", obj{"type": "token_count"})
		}
		b.output("call_1", "Process exited with code 0\nOutput:\nx").said("t1", "m1", "done").usage(10, 0, 1).complete("t1")
		c, per := b.run()
		return append(flat(per), c.Flush()...)
	}
	a, b := mk(false), mk(true)
	if len(a) != len(b) {
		t.Fatalf("%d envelopes, %d with other lines", len(a), len(b))
	}
	ids := map[string]bool{}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Turn != b[i].Turn {
			t.Errorf("envelope %d: %s/%s vs %s/%s", i, a[i].ID, a[i].Turn, b[i].ID, b[i].Turn)
		}
		if ids[a[i].ID] {
			t.Errorf("id %s twice", a[i].ID)
		}
		ids[a[i].ID] = true
	}
}

// TestCodexSubagentThread: a subagent thread's records (MapThread) go into
// the parent's session under a subagent of their own: its prompt as its
// first text, its turn as start … stop inside the parent's open turn, or
// in a turn of its own when the parent's had ended.
func TestCodexSubagentThread(t *testing.T) {
	const child = "01a21dbb-e24b-7ca3-aa69-cdca4f166101"
	p := &cx{t: t}
	p.started("p1").prompt("p1", "u1", "spawn").
		add("response_item", obj{"type": "function_call", "name": "spawn_agent", "namespace": "multi_agent_v1", "arguments": `{"message":"go"}`, "call_id": "c1"}).
		usage(1, 0, 1)
	k := &cx{t: t}
	k.add("session_meta", obj{"id": child, "parent_thread_id": cxThread, "agent_nickname": "Ada"}).
		started("k1").prompt("k1", "ku1", "go").said("k1", "km1", "done").usage(1, 0, 1).complete("k1").
		started("k2").prompt("k2", "ku2", "again").said("k2", "km2", "more").usage(1, 0, 1).complete("k2")
	q := &cx{t: t}
	q.output("c1", "spawned").complete("p1")

	c := NewCodex(cxThread)
	var out []protocol.Envelope
	for _, r := range p.lines {
		out = append(out, c.Map(r)...)
	}
	for _, r := range k.lines[:8] { // the child's first turn, in the parent's
		out = append(out, c.MapThread(child, r)...)
	}
	for _, r := range q.lines {
		out = append(out, c.Map(r)...)
	}
	for _, r := range k.lines[8:] { // its second, after the parent's ended
		out = append(out, c.MapThread(child, r)...)
	}
	out = append(out, c.Close(protocol.StatusCompleted)...)
	got := kinds(out)
	want := "text:spawn | turn-start | tool-call-start:multi_agent_v1.spawn_agent+usage | start | text:go | text:done+usage | stop | " +
		"tool-call-end:spawned | turn-end:completed | turn-start | start | text:again | text:more+usage | stop | turn-end:completed"
	if got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	sub := protocol.SubagentID(SubagentProvider(child))
	turns := map[string]bool{}
	for i, e := range out {
		if err := e.Validate(); err != nil {
			t.Fatalf("envelope %d: %v", i, err)
		}
		if e.Ev.T == protocol.KindStart && e.Ev.Title != "Ada" {
			t.Errorf("start titled %q", e.Ev.Title)
		}
		inSub := e.Ev.T == protocol.KindStart || e.Ev.T == protocol.KindStop || e.Ev.Text == "go" || e.Ev.Text == "done" || e.Ev.Text == "again" || e.Ev.Text == "more"
		if inSub != (e.Subagent == sub) || (inSub && e.Role != protocol.RoleAgent) {
			t.Errorf("envelope %d (%s %q): subagent %q", i, e.Ev.T, e.Ev.Text, e.Subagent)
		}
		if e.Ev.T == protocol.KindTurnStart {
			if turns[e.Turn] {
				t.Errorf("turn %s started twice", e.Turn)
			}
			turns[e.Turn] = true
		}
	}
}

// TestCodexOpenUnfinished: a Codex turn still open is unfinished even with
// no call open (the model had not answered a tool's output), since Codex
// writes every turn's end.
func TestCodexOpenUnfinished(t *testing.T) {
	b := &cx{t: t}
	b.started("t1").prompt("t1", "u", "run").shell("call_1", "ls").usage(1, 0, 1).output("call_1", "Process exited with code 0\nOutput:\nx")
	c, _ := b.run()
	ot := c.Open()
	if ot.Turn == "" || !ot.Unfinished || len(ot.Calls) != 0 {
		t.Fatalf("open turn %+v", ot)
	}
	if got := kinds(c.Cut(Cut{Status: protocol.StatusFailed, Result: CodexCutResult, Note: CodexCutNote})); got != "service:"+CodexCutNote+" | turn-end:failed" {
		t.Fatalf("cut: %s", got)
	}
	done := &cx{t: t}
	done.started("t1").prompt("t1", "u", "hi").said("t1", "m", "yo").usage(1, 0, 1).complete("t1")
	if c, _ := done.run(); c.Open().Turn != "" {
		t.Fatal("a completed turn is open")
	}
}

// A turn of calls that never get their output (a rollout cut short, or
// odd) keeps what it holds for them bounded, as the open calls are
// (MaxEndedCalls): the parsed patches, the items and the names of calls
// long gone from the open list are dropped.
func TestCodexOpenCallsBounded(t *testing.T) {
	b := &cx{t: t}
	b.started("t1")
	const n = MaxEndedCalls + 100 // two calls each
	for i := range n {
		call := fmt.Sprintf("call_%d", i)
		b.add("event_msg", obj{"type": "item_completed", "turn_id": "t1", "item": obj{"type": "CommandExecution", "id": call, "command": []string{"ls"}}})
		b.shell(call, "ls")
		b.add("response_item", obj{"type": "custom_tool_call", "name": "apply_patch", "call_id": call + "p",
			"input": "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch"})
	}
	c := NewCodex(cxThread)
	for _, r := range b.lines {
		c.Map(r)
	}
	for name, kept := range map[string]int{"names": len(c.kinds), "items": len(c.commands), "patches": len(c.patches)} {
		if kept > 2*MaxEndedCalls {
			t.Errorf("after %d calls without output, %d %s kept for them; want at most %d", 2*n, kept, name, 2*MaxEndedCalls)
		}
	}
	// The last calls are still whole: an output ends its call.
	last := fmt.Sprintf("call_%d", n-1)
	if t.Failed() {
		return
	}
	if c.kinds[last] == "" || c.commands[last] == nil || c.kinds[last+"p"] == "" {
		t.Fatalf("the last call is not kept (%q, %v)", c.kinds[last], c.commands[last] != nil)
	}
}
