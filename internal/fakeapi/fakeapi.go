// Package fakeapi is a scripted fake of the Anthropic Messages API, served on
// 127.0.0.1 only, so the real Claude Code can run offline in tests with
// ANTHROPIC_BASE_URL pointing at it. It streams Server-Sent Events like the
// real API (message_start, content_block_start/delta/stop, message_delta,
// message_stop) and answers non-streaming requests with one JSON message.
package fakeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Block is one content block of a scripted reply.
type Block struct {
	Type  string         // "text", "thinking" or "tool_use"
	Text  string         // text and thinking
	Name  string         // tool_use
	Input map[string]any // tool_use
}

// Text, Thinking and ToolUse build blocks.
func Text(s string) Block     { return Block{Type: "text", Text: s} }
func Thinking(s string) Block { return Block{Type: "thinking", Text: s} }
func ToolUse(name string, input map[string]any) Block {
	return Block{Type: "tool_use", Name: name, Input: input}
}

// Rule answers the requests it matches. Empty conditions match anything.
type Rule struct {
	// Agent is "main", "subagent" or "" (either). Subagent requests carry
	// cc_is_subagent=true in their first system block.
	Agent string
	// LastUserContains matches the text of the last user message (text
	// blocks and tool results).
	LastUserContains string
	// AfterToolResult, when set, matches only requests whose last message
	// is (true) or is not (false) a tool result.
	AfterToolResult *bool
	// Times bounds how often the rule answers; 0 means always.
	Times int
	// Reply is what the rule answers; Status, if set, answers an HTTP error
	// instead.
	Reply  []Block
	Status int
	// Delay holds the reply back, e.g. to interrupt it.
	Delay time.Duration
	// ChunkDelay streams text word by word with this pause between
	// words: a slow reply that can be interrupted while it streams.
	ChunkDelay time.Duration
	// Usage, if set, is the token usage the reply reports (else 12 input
	// and 7 output tokens): what a context meter reads.
	Usage *Usage
	// StopReason, if set, replaces the stop reason the reply's blocks imply
	// (end_turn, or tool_use after a tool call): e.g. "max_tokens".
	StopReason string
	// Hold, if set, holds the reply until it is closed or the request is
	// cancelled: Claude waits for the model as long as a test wants.
	// With HoldMidStream the reply's first piece of text is streamed
	// first (Claude is streaming). Server.Held counts the replies held.
	Hold          <-chan struct{}
	HoldMidStream bool

	used int
}

// Usage is the token usage of a scripted reply.
type Usage struct {
	Input, Output, CacheRead, CacheCreation int
}

func (u *Usage) fields(output int) map[string]any {
	if u == nil {
		u = &Usage{Input: 12, Output: 7}
	}
	if output < 0 {
		output = u.Output
	}
	return map[string]any{"input_tokens": u.Input, "output_tokens": output, "cache_creation_input_tokens": u.CacheCreation,
		"cache_read_input_tokens": u.CacheRead, "service_tier": "standard"}
}

// Bool returns a pointer to b, for Rule.AfterToolResult.
func Bool(b bool) *bool { return &b }

// Request is what the server logs for each call.
type Request struct {
	Path     string
	Stream   bool
	Subagent bool
	LastUser string
	Rule     int // index of the rule that answered, -1 for the default
	// Messages is how many messages the request carried: the conversation
	// so far (a resumed session's earlier turns included).
	Messages int
	// UserContent is the raw content of every user message, one a line:
	// what the conversation Claude sent holds (strings.Contains).
	UserContent string
}

// Server is a running fake API.
type Server struct {
	URL string

	mu       sync.Mutex
	rules    []*Rule
	requests []Request
	nextMsg  int
	nextTool int
	held     int
	srv      *http.Server
	ln       net.Listener
}

// Start serves rules on a random 127.0.0.1 port.
func Start(rules ...Rule) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake API listen: %w", err)
	}
	s := &Server{ln: ln, URL: "http://" + ln.Addr().String()}
	for i := range rules {
		r := rules[i]
		s.rules = append(s.rules, &r)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"input_tokens": 12})
	})
	mux.HandleFunc("HEAD /", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		writeJSON(w, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": r.URL.Path}})
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// SetRules replaces the rules, e.g. with ones that name files of a project
// made after the server started.
func (s *Server) SetRules(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = s.rules[:0]
	for i := range rules {
		r := rules[i]
		s.rules = append(s.rules, &r)
	}
}

// Held is how many replies have reached their rule's Hold so far.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// hold waits for c (if not nil) or for ctx, and reports whether c came.
func (s *Server) hold(ctx context.Context, c <-chan struct{}) bool {
	if c == nil {
		return true
	}
	s.mu.Lock()
	s.held++
	s.mu.Unlock()
	select {
	case <-c:
		return true
	case <-ctx.Done():
		return false
	}
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns the calls served so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

type apiRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Tools    json.RawMessage `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	sub := strings.Contains(string(req.System), "cc_is_subagent=true")
	last, afterResult := lastUser(&req)
	rule, idx := s.match(&req, sub, last, afterResult)
	var said strings.Builder
	for _, m := range req.Messages {
		if m.Role == "user" {
			said.Write(m.Content)
			said.WriteByte('\n')
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Stream: req.Stream, Subagent: sub, LastUser: last, Rule: idx, Messages: len(req.Messages),
		UserContent: said.String()})
	s.mu.Unlock()

	reply := []Block{Text("ok")}
	var usage *Usage
	if rule != nil {
		usage = rule.Usage
		if rule.Delay > 0 {
			select {
			case <-time.After(rule.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if !rule.HoldMidStream && !s.hold(r.Context(), rule.Hold) {
			return
		}
		if rule.Status != 0 {
			w.WriteHeader(rule.Status)
			writeJSON(w, map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "scripted error"}})
			return
		}
		reply = rule.Reply
	}
	msg := s.build(req.Model, reply, usage)
	if rule != nil && rule.StopReason != "" {
		msg.StopReason = rule.StopReason
	}
	if !req.Stream {
		writeJSON(w, msg)
		return
	}
	chunk := time.Duration(0)
	var hold <-chan struct{}
	if rule != nil {
		chunk = rule.ChunkDelay
		if rule.HoldMidStream {
			hold = rule.Hold
		}
	}
	s.stream(r.Context(), w, msg, chunk, usage, hold)
}

// match picks the first rule that matches and has uses left. Requests
// without tools (title or summary side requests) never consume rules.
func (s *Server) match(req *apiRequest, sub bool, last string, afterResult bool) (*Rule, int) {
	if len(req.Tools) == 0 || string(req.Tools) == "null" {
		return nil, -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.rules {
		if r.Times > 0 && r.used >= r.Times {
			continue
		}
		if (r.Agent == "main" && sub) || (r.Agent == "subagent" && !sub) {
			continue
		}
		if r.LastUserContains != "" && !strings.Contains(last, r.LastUserContains) {
			continue
		}
		if r.AfterToolResult != nil && *r.AfterToolResult != afterResult {
			continue
		}
		r.used++
		return r, i
	}
	return nil, -1
}

// lastUser returns the text of the last user message and whether it is a
// tool result.
func lastUser(req *apiRequest) (string, bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			return str, false
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(m.Content, &blocks)
		var sb strings.Builder
		result := false
		for _, b := range blocks {
			switch b.Type {
			case "text":
				sb.WriteString(b.Text + "\n")
			case "tool_result":
				result = true
				sb.WriteString(string(b.Content) + "\n")
			}
		}
		return sb.String(), result
	}
	return "", false
}

type message struct {
	ID         string           `json:"id"`
	Type       string           `json:"type"`
	Role       string           `json:"role"`
	Model      string           `json:"model"`
	Content    []map[string]any `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      map[string]any   `json:"usage"`
}

func (s *Server) build(model string, blocks []Block, usage *Usage) message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg++
	m := message{ID: fmt.Sprintf("msg_fake%04d", s.nextMsg), Type: "message", Role: "assistant", Model: model,
		StopReason: "end_turn",
		Usage:      usage.fields(-1)}
	for _, b := range blocks {
		switch b.Type {
		case "thinking":
			m.Content = append(m.Content, map[string]any{"type": "thinking", "thinking": b.Text, "signature": "sig-fake"})
		case "tool_use":
			s.nextTool++
			in := b.Input
			if in == nil {
				in = map[string]any{}
			}
			m.Content = append(m.Content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%04d", s.nextTool), "name": b.Name, "input": in})
			m.StopReason = "tool_use"
		default:
			m.Content = append(m.Content, map[string]any{"type": "text", "text": b.Text})
		}
	}
	return m
}

func (s *Server) stream(ctx context.Context, w http.ResponseWriter, m message, chunk time.Duration, usage *Usage, hold <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	start := m
	start.Content = []map[string]any{}
	start.StopReason = ""
	startMap := map[string]any{"id": start.ID, "type": "message", "role": "assistant", "model": start.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage.fields(1)}
	send("message_start", map[string]any{"type": "message_start", "message": startMap})
	send("ping", map[string]any{"type": "ping"})
	for i, b := range m.Content {
		switch b["type"] {
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			pieces := halves(b["text"].(string))
			if chunk > 0 {
				pieces = words(b["text"].(string))
			}
			for j, piece := range pieces {
				if j == 1 && hold != nil {
					if !s.hold(ctx, hold) {
						return
					}
					hold = nil
				}
				if chunk > 0 && j > 0 {
					select {
					case <-time.After(chunk):
					case <-ctx.Done():
						return
					}
				}
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
			}
		case "thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": b["thinking"]}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b["signature"]}})
		case "tool_use":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			for _, piece := range halves(string(in)) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": m.Usage["output_tokens"]}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// words splits s after each space, keeping the spaces.
func words(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// halves splits s in two pieces on a rune boundary (one piece if short).
func halves(s string) []string {
	r := []rune(s)
	if len(r) < 2 {
		return []string{s}
	}
	return []string{string(r[:len(r)/2]), string(r[len(r)/2:])}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
