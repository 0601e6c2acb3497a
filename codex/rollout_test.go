package codex

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readSample parses every line of a sample rollout.
func readSample(t *testing.T, name string) []*Record {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, MaxLineBytes)
	var out []*Record
	for sc.Scan() {
		r, err := Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("%s line %d: %v", name, len(out)+1, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParseSamples: every line Codex 0.169.0 wrote in the sample runs
// parses, ordinals count lines from 0, and each kind the mapper reads
// decodes its fields.
func TestParseSamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "samples", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		recs := readSample(t, filepath.Base(f))
		if recs[0].SessionMeta == nil || recs[0].SessionMeta.ID == "" || recs[0].SessionMeta.CLIVersion != TestedVersion {
			t.Errorf("%s: first line is not a session_meta of %s: %+v", f, TestedVersion, recs[0].SessionMeta)
		}
		for i, r := range recs {
			if !r.HasOrdinal || r.Ordinal != int64(i) || r.Timestamp <= 0 {
				t.Errorf("%s line %d: ordinal %d (%v), time %d", f, i, r.Ordinal, r.HasOrdinal, r.Timestamp)
			}
			kind := r.Type
			switch {
			case r.Event != nil:
				kind += "/" + r.Event.Type
				if r.Event.Item != nil {
					kind += "/" + r.Event.Item.Type
				}
			case r.Item != nil:
				kind += "/" + r.Item.Type
			}
			seen[kind] = true
		}
	}
	for _, k := range []string{"session_meta", "turn_context", "world_state", "token_usage_record",
		"event_msg/task_started", "event_msg/task_complete", "event_msg/turn_aborted", "event_msg/token_count",
		"event_msg/item_completed/UserMessage", "event_msg/item_completed/AgentMessage", "event_msg/item_completed/Reasoning",
		"event_msg/item_completed/CommandExecution", "event_msg/item_completed/FileChange",
		"response_item/message", "response_item/reasoning", "response_item/function_call", "response_item/function_call_output",
		"response_item/custom_tool_call", "response_item/custom_tool_call_output"} {
		if !seen[k] {
			t.Errorf("no %s in the samples", k)
		}
	}
}

// TestParseKinds decodes one line of each kind and checks the fields the
// mapper uses.
func TestParseKinds(t *testing.T) {
	shell := readSample(t, "shell_resume.jsonl")
	find := func(recs []*Record, pred func(*Record) bool) *Record {
		t.Helper()
		for _, r := range recs {
			if pred(r) {
				return r
			}
		}
		t.Fatal("no such record")
		return nil
	}
	meta := shell[0].SessionMeta
	if meta.Cwd != "/home/user/proj" || meta.SourceName() != "exec" || meta.Originator != "codex_exec" || meta.Git == nil || meta.Git.Branch != "master" {
		t.Errorf("session_meta: %+v", meta)
	}
	tc := find(shell, func(r *Record) bool { return r.TurnContext != nil }).TurnContext
	if tc.Model != "gpt-5.5" || tc.ApprovalPolicy != "never" || tc.SandboxType() != "read-only" || tc.TurnID == "" {
		t.Errorf("turn_context: %+v", tc)
	}
	started := find(shell, func(r *Record) bool { return r.Event != nil && r.Event.Type == EventTaskStarted }).Event
	if started.TurnID == "" || started.ModelContextWindow == nil || *started.ModelContextWindow != 258400 {
		t.Errorf("task_started: %+v", started)
	}
	fc := find(shell, func(r *Record) bool { return r.Item != nil && r.Item.Type == ItemFunctionCall }).Item
	if fc.Name != "exec_command" || fc.CallID != "call_0002" || !strings.Contains(fc.Arguments, "echo hello-from-shell") {
		t.Errorf("function_call: %+v", fc)
	}
	out := find(shell, func(r *Record) bool { return r.Item != nil && r.Item.Type == ItemFunctionCallOutput }).Item
	if out.CallID != "call_0002" || !strings.Contains(out.OutputText(), "Process exited with code 0") {
		t.Errorf("function_call_output: %+v %q", out, out.OutputText())
	}
	ce := find(shell, func(r *Record) bool {
		return r.Event != nil && r.Event.Item != nil && r.Event.Item.Type == TurnItemCommandExecution
	}).Event.Item
	if ce.ID != "call_0002" || ce.ExitCode == nil || *ce.ExitCode != 0 || ce.AggregatedOutput == nil || ce.Status != "completed" || len(ce.Command) != 3 {
		t.Errorf("CommandExecution: %+v", ce)
	}
	rs := find(shell, func(r *Record) bool { return r.Item != nil && r.Item.Type == ItemReasoning }).Item
	if rs.Text() != "**Listing files**\n\nI will list." {
		t.Errorf("reasoning text %q", rs.Text())
	}
	tu := find(shell, func(r *Record) bool { return r.Usage != nil }).Usage
	if tu.Usage == nil || tu.Usage.InputTokens != 1002 || tu.Usage.CachedInputTokens != 200 || tu.ResponseID != "resp_0002" {
		t.Errorf("token_usage_record: %+v", tu)
	}
	tcnt := find(shell, func(r *Record) bool { return r.Event != nil && r.Event.Type == EventTokenCount }).Event
	if tcnt.Info == nil || tcnt.Info.Last == nil || tcnt.Info.Last.OutputTokens != 32 {
		t.Errorf("token_count: %+v", tcnt.Info)
	}

	upd := readSample(t, "patch_update.jsonl")
	ch := find(upd, func(r *Record) bool {
		return r.Event != nil && r.Event.Item != nil && r.Event.Item.Type == TurnItemFileChange
	}).Event.Item
	var kinds []string
	for _, c := range ch.Changes {
		kinds = append(kinds, c.Kind+" "+filepath.Base(c.Path))
	}
	if got := strings.Join(kinds, ", "); got != "delete gone.txt, update a.txt, update b.txt" {
		t.Errorf("FileChange changes in order: %s", got)
	}
	if ch.Changes[1].UnifiedDiff == "" || ch.Changes[2].MovePath == nil || filepath.Base(*ch.Changes[2].MovePath) != "c.txt" {
		t.Errorf("FileChange update: %+v", ch.Changes)
	}

	ab := find(readSample(t, "interrupt.jsonl"), func(r *Record) bool { return r.Event != nil && r.Event.Type == EventTurnAborted }).Event
	if ab.Reason != "interrupted" || ab.TurnID == "" {
		t.Errorf("turn_aborted: %+v", ab)
	}
	fail := find(readSample(t, "api_error.jsonl"), func(r *Record) bool { return r.Event != nil && r.Event.Type == EventTaskComplete }).Event
	if fail.Error == nil || !strings.Contains(fail.Error.Message, "bad request from fake") {
		t.Errorf("task_complete error: %+v", fail.Error)
	}
}

// TestParseHostile: malformed or odd lines are errors or unknown records,
// never panics, and known types with a payload of the wrong shape are
// refused.
func TestParseHostile(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		ok         bool
		typ        string
	}{
		{"empty", ``, false, ""},
		{"array", `[1,2]`, false, ""},
		{"string", `"x"`, false, ""},
		{"cut", `{"timestamp":"2026-11-27T15:46:48.908Z","ordinal":0,"type":"event_msg","payload":{"type":"task_st`, false, ""},
		{"unknown type", `{"timestamp":"x","ordinal":3,"type":"future_thing","payload":{"a":1}}`, true, "future_thing"},
		{"unknown type, scalar payload", `{"type":"future_thing","payload":7}`, true, "future_thing"},
		{"no payload", `{"type":"world_state"}`, true, "world_state"},
		{"event payload not object", `{"type":"event_msg","payload":[1]}`, false, ""},
		{"item payload null", `{"type":"response_item","payload":null}`, false, ""},
		{"wrong field type", `{"type":"event_msg","payload":{"type":"token_count","info":"x"}}`, false, ""},
		{"changes not object", `{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"FileChange","changes":[1]}}}`, false, ""},
		{"unknown event kind", `{"type":"event_msg","payload":{"type":"agent_reasoning_delta","delta":"x"}}`, true, "event_msg"},
		{"negative ordinal", `{"type":"response_item","ordinal":-4,"payload":{"type":"message"}}`, true, "response_item"},
		{"crlf", "{\"type\":\"turn_context\",\"payload\":{\"model\":\"m\"}}\r\n", true, "turn_context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.line))
			if (err == nil) != tc.ok {
				t.Fatalf("Parse(%q) error %v, want ok=%v", tc.line, err, tc.ok)
			}
			if err == nil && r.Type != tc.typ {
				t.Fatalf("type %q, want %q", r.Type, tc.typ)
			}
			if err == nil && tc.name == "negative ordinal" && r.HasOrdinal {
				t.Fatal("a negative ordinal was taken")
			}
		})
	}
	long := make([]byte, MaxLineBytes+1)
	long[0] = '{'
	if _, err := Parse(long); err != ErrTooLong {
		t.Fatalf("an over-long line: %v", err)
	}
}

// TestOutputText reads a tool output in each shape it can have.
func TestOutputText(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`"plain"`, "plain"},
		{`{"content":"in object","success":true}`, "in object"},
		{`[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"},{"type":"input_text","text":"b"}]`, "a\nb"},
		{`{"content":[{"type":"input_text","text":"c"}]}`, "c"},
		{`{"content":{"content":"deep"}}`, ""},
		{`7`, ""},
		{``, ""},
	} {
		it := ResponseItem{Output: []byte(tc.raw)}
		if got := it.OutputText(); got != tc.want {
			t.Errorf("OutputText(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
