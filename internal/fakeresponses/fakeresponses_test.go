package fakeresponses

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// event is one decoded SSE event.
type event map[string]any

func (e event) typ() string { s, _ := e["type"].(string); return s }

// post sends body to /v1/responses with ctx and returns the events read.
func post(ctx context.Context, t *testing.T, s *Server, body string) (int, []event) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("thread-id", "thread-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readEvents(t, resp.Body)
}

func readEvents(t *testing.T, r io.Reader) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			var e event
			if err := json.Unmarshal([]byte(v), &e); err != nil {
				t.Fatalf("data is not JSON: %v: %s", err, v)
			}
			if e.typ() != name {
				t.Fatalf("event %q carries data of type %q", name, e.typ())
			}
			out = append(out, e)
		}
	}
	return out
}

// body is a request as Codex sends it: a developer message, the injected
// environment context, the prompt, then items (calls and outputs).
func body(prompt string, items ...string) string {
	in := []string{
		`{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/p</cwd>\n</environment_context>"}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":` + quote(prompt) + `}]}`,
	}
	in = append(in, items...)
	return `{"model":"gpt-5.5","stream":true,"prompt_cache_key":"thread-1","tools":[{"type":"function","name":"exec_command"},{"type":"custom","name":"apply_patch"},{"type":"namespace","name":"multi_agent_v1","tools":[{"name":"spawn_agent"}]},{"type":"web_search"}],"input":[` +
		strings.Join(in, ",") + `]}`
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// done returns the output items of the response.output_item.done events.
func done(evs []event) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e.typ() == "response.output_item.done" {
			out = append(out, e["item"].(map[string]any))
		}
	}
	return out
}

// summary describes output items as "kind:name" or "kind:text".
func summary(items []map[string]any) string {
	var parts []string
	for _, it := range items {
		switch it["type"] {
		case "function_call":
			name := it["name"].(string)
			if ns, ok := it["namespace"].(string); ok {
				name = ns + "." + name
			}
			parts = append(parts, "function_call:"+name)
		case "custom_tool_call":
			parts = append(parts, "custom_tool_call:"+it["name"].(string))
		default:
			parts = append(parts, it["type"].(string))
		}
	}
	return strings.Join(parts, ",")
}

// callItems turns the calls of a reply into the input items of the next
// request, each followed by its output.
func callItems(items []map[string]any, output string) []string {
	var out []string
	for _, it := range items {
		switch it["type"] {
		case "function_call", "custom_tool_call":
			b, _ := json.Marshal(it)
			out = append(out, string(b))
			typ := it["type"].(string) + "_output"
			out = append(out, fmt.Sprintf(`{"type":%q,"call_id":%q,"output":%s}`, typ, it["call_id"], quote(output)))
		}
	}
	return out
}

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("not on loopback: %s", s.URL)
	}
	return s
}

// Each scenario scripts a turn: its first reply, then a reply per tool
// output sent back, ending with text.
func TestScenarios(t *testing.T) {
	tests := []struct {
		prompt string
		steps  []string // the output items of each reply, in turn
		check  func(t *testing.T, first []map[string]any)
	}{
		{"say hi", []string{"reasoning,message"}, func(t *testing.T, first []map[string]any) {
			sum := first[0]["summary"].([]any)[0].(map[string]any)
			if sum["text"] != TextSummary || first[1]["content"].([]any)[0].(map[string]any)["text"] != TextReply {
				t.Errorf("text reply %v", first)
			}
		}},
		{"SHELL: list the files", []string{"reasoning,function_call:exec_command", "message"}, func(t *testing.T, first []map[string]any) {
			var args map[string]any
			json.Unmarshal([]byte(first[1]["arguments"].(string)), &args)
			if args["cmd"] != ShellCommand {
				t.Errorf("shell args %v", args)
			}
		}},
		{"PATCH please", []string{"reasoning,custom_tool_call:apply_patch", "message"}, func(t *testing.T, first []map[string]any) {
			if first[1]["input"] != PatchAdd || !strings.Contains(PatchAdd, "*** Add File: hello.txt\n+hello from the patch\n+second line\n") {
				t.Errorf("patch input %q", first[1]["input"])
			}
		}},
		{"PATCHEDIT please", []string{"reasoning,custom_tool_call:apply_patch", "message"}, func(t *testing.T, first []map[string]any) {
			if first[1]["input"] != PatchUpdate || !strings.Contains(PatchUpdate, "*** Update File: notes.txt\n@@\n") {
				t.Errorf("patch input %q", first[1]["input"])
			}
		}},
		{"ESCALATE now", []string{"function_call:exec_command", "message"}, func(t *testing.T, first []map[string]any) {
			var args map[string]any
			json.Unmarshal([]byte(first[0]["arguments"].(string)), &args)
			if args["sandbox_permissions"] != "require_escalated" || args["justification"] != EscalateJustification {
				t.Errorf("escalate args %v", args)
			}
		}},
		{"SLOWSHELL", []string{"function_call:exec_command", "message"}, func(t *testing.T, first []map[string]any) {
			var args map[string]any
			json.Unmarshal([]byte(first[0]["arguments"].(string)), &args)
			if args["cmd"] != SlowCommand || args["yield_time_ms"] != float64(SlowYieldMS) {
				t.Errorf("slow shell args %v", args)
			}
		}},
		{"SUBAGENT", []string{"function_call:multi_agent_v1.spawn_agent", "function_call:multi_agent_v1.wait_agent", "message"}, nil},
		{"ASKUSER", []string{"function_call:request_user_input", "message"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			s := start(t)
			var items []string
			for i, want := range tt.steps {
				out := "ok"
				if i == 0 && strings.Contains(want, "spawn_agent") {
					out = `{"agent_id":"agent-7","nickname":"Ada"}`
				}
				status, evs := post(context.Background(), t, s, body(tt.prompt, items...))
				if status != http.StatusOK {
					t.Fatalf("step %d: status %d", i, status)
				}
				got := done(evs)
				if summary(got) != want {
					t.Fatalf("step %d: items %s, want %s", i, summary(got), want)
				}
				if i == 0 && tt.check != nil {
					tt.check(t, got)
				}
				if evs[0].typ() != "response.created" || evs[len(evs)-1].typ() != "response.completed" {
					t.Fatalf("step %d: events from %s to %s", i, evs[0].typ(), evs[len(evs)-1].typ())
				}
				for j, e := range evs {
					if e["sequence_number"] != float64(j) {
						t.Fatalf("event %d has sequence number %v", j, e["sequence_number"])
					}
				}
				items = append(items, callItems(got, out)...)
				if strings.Contains(want, "wait_agent") {
					var args map[string]any
					json.Unmarshal([]byte(got[0]["arguments"].(string)), &args)
					if fmt.Sprint(args["targets"]) != "[agent-7]" {
						t.Fatalf("wait_agent waits for %v, not the spawned agent", args["targets"])
					}
				}
			}
			reqs := s.Requests()
			if len(reqs) != len(tt.steps) {
				t.Fatalf("%d requests recorded, want %d", len(reqs), len(tt.steps))
			}
			for i, r := range reqs {
				if r.Step != i || r.LastUser != tt.prompt || r.Scenario != Choose(tt.prompt) || r.ThreadID != "thread-1" || r.Model != "gpt-5.5" {
					t.Errorf("request %d recorded as %+v", i, r)
				}
				if len(r.Outputs) != i {
					t.Errorf("request %d: %d outputs, want %d", i, len(r.Outputs), i)
				}
			}
			if want := []string{"exec_command", "apply_patch", "multi_agent_v1.spawn_agent", "web_search"}; !slices.Equal(reqs[0].Tools, want) {
				t.Errorf("tools %v, want %v", reqs[0].Tools, want)
			}
		})
	}
}

// The usage of response.completed is what the scenario scripts, in the
// Responses API's shape.
func TestUsage(t *testing.T) {
	s := start(t)
	_, evs := post(context.Background(), t, s, body("hi"))
	last := evs[len(evs)-1]
	u := last["response"].(map[string]any)["usage"].(map[string]any)
	want := usageFor(0)
	if u["input_tokens"] != float64(want.Input) || u["output_tokens"] != float64(want.Output) ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(want.Cached) ||
		u["output_tokens_details"].(map[string]any)["reasoning_tokens"] != float64(want.Reasoning) ||
		u["total_tokens"] != float64(want.Input+want.Output) {
		t.Fatalf("usage %v, want %+v", u, want)
	}
}

func TestChoose(t *testing.T) {
	for text, want := range map[string]Scenario{
		"say hi":                 Text,
		"SHELL: run ls":          Shell,
		"please (SLOWSHELL) now": SlowShell,
		"shell in lower case":    Text,
		"PATCHEDIT":              PatchEdit,
		"a PATCH":                Patch,
		"SHELLS are not SHELL":   Shell,
		"ESCALATED":              Text,
		"first ASKUSER then":     AskUser,
		"SLOWTEXT":               SlowText,
		"SUBAGENT":               Subagent,
		"ESCALATE":               Escalate,
	} {
		if got := Choose(text); got != want {
			t.Errorf("Choose(%q) = %s, want %s", text, got, want)
		}
	}
}

// Injected user messages (environment context, subagent notifications)
// are not prompts: the turn and its step still come from the prompt.
func TestInjectedMessagesAreNotPrompts(t *testing.T) {
	s := start(t)
	call := `{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"}`
	out := `{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"done"}]}`
	note := `{"type":"message","role":"user","content":[{"type":"input_text","text":"<subagent_notification>\n{}\n</subagent_notification>"}]}`
	_, evs := post(context.Background(), t, s, body("SHELL", call, out, note))
	if got := summary(done(evs)); got != "message" {
		t.Fatalf("after the output: %s", got)
	}
	r := s.Requests()[0]
	if r.Scenario != Shell || r.Step != 1 || len(r.Outputs) != 1 || r.Outputs[0].Output != "done" || r.Outputs[0].CallID != "c1" {
		t.Fatalf("recorded %+v", r)
	}
}

// SLOWTEXT streams a few deltas, waits at its pause until released, then
// streams the rest.
func TestSlowTextRelease(t *testing.T) {
	s := start(t)
	got := make(chan []event, 1)
	go func() {
		_, evs := post(context.Background(), t, s, body("SLOWTEXT"))
		got <- evs
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitPaused(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("the reply ended during its pause")
	default:
	}
	s.Release()
	var evs []event
	select {
	case evs = <-got:
	case <-ctx.Done():
		t.Fatal("the reply did not end after Release")
	}
	var text strings.Builder
	deltas := 0
	for _, e := range evs {
		if e.typ() == "response.output_text.delta" {
			deltas++
			text.WriteString(e["delta"].(string))
		}
	}
	if text.String() != SlowTextReply || deltas != len(strings.Fields(SlowTextReply)) || deltas <= SlowTextBeforePause {
		t.Fatalf("%d deltas: %q", deltas, text.String())
	}
	if evs[len(evs)-1].typ() != "response.completed" {
		t.Fatalf("last event %s", evs[len(evs)-1].typ())
	}
}

// A SLOWTEXT reply whose request is cancelled at the pause (an interrupt)
// ends without completing; one nobody releases goes on after PauseTimeout.
func TestSlowTextCancelAndTimeout(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/responses", strings.NewReader(body("SLOWTEXT")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := s.WaitPaused(wctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "response.completed") {
		t.Fatal("a cancelled reply completed")
	}

	s.SetPauseTimeout(10 * time.Millisecond)
	_, evs := post(wctx, t, s, body("SLOWTEXT"))
	if evs[len(evs)-1].typ() != "response.completed" || s.Paused() != 2 {
		t.Fatalf("after the timeout: last event %s, %d pauses", evs[len(evs)-1].typ(), s.Paused())
	}
}

// The server keeps the latest MaxRequests requests only, and records what
// it refused.
func TestRequestsBounded(t *testing.T) {
	s := start(t)
	for i := range MaxRequests + 5 {
		post(context.Background(), t, s, body(fmt.Sprintf("prompt %d", i)))
	}
	reqs := s.Requests()
	if len(reqs) != MaxRequests || reqs[len(reqs)-1].LastUser != fmt.Sprintf("prompt %d", MaxRequests+4) || reqs[0].LastUser != "prompt 5" {
		t.Fatalf("%d requests, first %q, last %q", len(reqs), reqs[0].LastUser, reqs[len(reqs)-1].LastUser)
	}
}

func TestRefused(t *testing.T) {
	s := start(t)
	for _, tt := range []struct {
		path, body, encoding string
		status               int
	}{
		{"/v1/responses", `{"stream":false,"input":[]}`, "", http.StatusBadRequest},
		{"/v1/responses", `not json`, "", http.StatusBadRequest},
		{"/v1/responses", `{}`, "zstd", http.StatusUnsupportedMediaType},
		{"/v1/models", ``, "", http.StatusNotFound},
	} {
		req, _ := http.NewRequest("POST", s.URL+tt.path, strings.NewReader(tt.body))
		if tt.encoding != "" {
			req.Header.Set("Content-Encoding", tt.encoding)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tt.status || e.Error.Message == "" {
			t.Errorf("%s %q: status %d, error %q", tt.path, tt.body, resp.StatusCode, e.Error.Message)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[3].Path != "/v1/models" || reqs[3].Status != http.StatusNotFound {
		t.Fatalf("recorded %+v", reqs)
	}
}
