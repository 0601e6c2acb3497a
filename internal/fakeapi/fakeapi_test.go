package fakeapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, s *Server, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(s.URL+"/v1/messages?beta=true", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestStreamAndRules(t *testing.T) {
	s, err := Start(
		Rule{Agent: "subagent", Reply: []Block{Text("from the subagent")}},
		Rule{AfterToolResult: Bool(true), Reply: []Block{Text("after the tool")}},
		Rule{Times: 1, Reply: []Block{Thinking("hmm"), Text("hello"), ToolUse("Bash", map[string]any{"command": "ls"})}},
	)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("not on loopback: %s", s.URL)
	}
	tools := `"tools":[{"name":"Bash"}]`
	resp := post(t, s, `{"model":"m","stream":true,`+tools+`,"system":[{"type":"text","text":"billing"}],"messages":[{"role":"user","content":"hi"}]}`)
	var events []string
	var deltas strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var d struct {
				Delta map[string]any `json:"delta"`
			}
			json.Unmarshal([]byte(data), &d)
			for _, k := range []string{"text", "thinking", "partial_json"} {
				if v, ok := d.Delta[k].(string); ok {
					deltas.WriteString(v)
				}
			}
		}
	}
	got := strings.Join(events, ",")
	want := "message_start,ping," +
		"content_block_start,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_delta,content_block_stop," +
		"message_delta,message_stop"
	if got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if d := deltas.String(); d != `hmmhello{"command":"ls"}` {
		t.Fatalf("deltas %q", d)
	}
	// The Times:1 rule is used up; a tool result and a subagent match
	// their rules; a request without tools consumes nothing.
	var m message
	json.NewDecoder(post(t, s, `{"model":"m",`+tools+`,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`).Body).Decode(&m)
	if m.Content[0]["text"] != "after the tool" || m.ID != "msg_fake0002" {
		t.Fatalf("tool result reply %+v", m)
	}
	json.NewDecoder(post(t, s, `{"model":"m",`+tools+`,"system":[{"type":"text","text":"x cc_is_subagent=true;"}],"messages":[{"role":"user","content":"go"}]}`).Body).Decode(&m)
	if m.Content[0]["text"] != "from the subagent" {
		t.Fatalf("subagent reply %+v", m)
	}
	json.NewDecoder(post(t, s, `{"model":"m","messages":[{"role":"user","content":"title?"}]}`).Body).Decode(&m)
	if m.Content[0]["text"] != "ok" {
		t.Fatalf("side request reply %+v", m)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[0].Rule != 2 || reqs[1].Rule != 1 || !reqs[2].Subagent || reqs[3].Rule != -1 {
		t.Fatalf("requests %+v", reqs)
	}
}

// A rule's Usage is what its reply reports, streamed or not; without one
// the reply reports the default 12 input and 7 output tokens.
func TestRuleUsage(t *testing.T) {
	s, err := Start(Rule{Times: 2, Usage: &Usage{Input: 3, Output: 250, CacheRead: 18000, CacheCreation: 900}, Reply: []Block{Text("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const req = `{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]`
	var m message
	json.NewDecoder(post(t, s, req+`}`).Body).Decode(&m)
	if m.Usage["input_tokens"] != 3.0 || m.Usage["output_tokens"] != 250.0 || m.Usage["cache_read_input_tokens"] != 18000.0 || m.Usage["cache_creation_input_tokens"] != 900.0 {
		t.Fatalf("usage %v", m.Usage)
	}
	// Streamed: message_start has the input side, message_delta the output.
	var start, delta map[string]any
	sc := bufio.NewScanner(post(t, s, req+`,"stream":true}`).Body)
	for sc.Scan() {
		var d struct {
			Type    string                         `json:"type"`
			Message struct{ Usage map[string]any } `json:"message"`
			Usage   map[string]any                 `json:"usage"`
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &d) == nil {
			switch d.Type {
			case "message_start":
				start = d.Message.Usage
			case "message_delta":
				delta = d.Usage
			}
		}
	}
	if start["cache_read_input_tokens"] != 18000.0 || start["input_tokens"] != 3.0 || delta["output_tokens"] != 250.0 {
		t.Fatalf("streamed usage: start %v, delta %v", start, delta)
	}
	json.NewDecoder(post(t, s, req+`}`).Body).Decode(&m)
	json.NewDecoder(post(t, s, req+`}`).Body).Decode(&m) // the rule is used up
	if m.Usage["input_tokens"] != 12.0 || m.Usage["output_tokens"] != 7.0 {
		t.Fatalf("default usage %v", m.Usage)
	}
}

// A held reply waits for its Hold: before anything (the model is thinking)
// or, with HoldMidStream, after the first half of its text (streaming).
func TestRuleHold(t *testing.T) {
	for _, mid := range []bool{false, true} {
		hold := make(chan struct{})
		s, err := Start(Rule{Hold: hold, HoldMidStream: mid, Reply: []Block{Text("0123456789ABCDEFGHIJ")}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		const req = `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}`
		events := make(chan string, 64)
		go func() {
			defer close(events)
			resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(req))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					events <- data
				}
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for s.Held() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the reply never reached its hold")
			}
			time.Sleep(5 * time.Millisecond)
		}
		var before []string
		for drained := false; !drained; {
			select {
			case e := <-events:
				before = append(before, e)
			case <-time.After(200 * time.Millisecond):
				drained = true
			}
		}
		got := strings.Join(before, "\n")
		if mid != strings.Contains(got, `"text":"0123456789"`) || strings.Contains(got, "ABCDEFGHIJ") || strings.Contains(got, "message_stop") {
			t.Fatalf("mid-stream %v: before the release the client read:\n%s", mid, got)
		}
		close(hold)
		var after []string
		for e := range events {
			after = append(after, e)
		}
		if got := strings.Join(after, "\n"); !strings.Contains(got, "ABCDEFGHIJ") || !strings.Contains(got, "message_stop") {
			t.Fatalf("mid-stream %v: after the release the client read:\n%s", mid, got)
		}
	}
}
