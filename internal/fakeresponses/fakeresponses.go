// Package fakeresponses is a scripted fake of the OpenAI Responses API,
// served on 127.0.0.1 only, so the real Codex CLI can run offline in tests
// with a model provider whose base_url points at it. It answers
// POST /v1/responses with the Server-Sent Events Codex reads
// (response.created, response.output_item.added/done, the text, reasoning
// summary, function call and custom tool call deltas, response.completed
// with usage).
//
// What it answers is chosen by a keyword in the last user message (see
// Scenario): a request that carries the outputs of the calls it scripted
// earlier (the next step of the same turn) gets the scenario's next step, so
// one prompt drives a whole turn of tool calls and their outputs.
package fakeresponses

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

// MaxRequests bounds the requests a server remembers (the latest are kept).
const MaxRequests = 256

// DefaultPauseTimeout is how long a SLOWTEXT reply waits at its pause when
// the test neither releases it nor cancels the request.
const DefaultPauseTimeout = 2 * time.Minute

// Request is what the server records of each call.
type Request struct {
	Method, Path string
	Model        string
	// ThreadID is the thread the request belongs to (Codex's thread-id
	// header, else prompt_cache_key).
	ThreadID string
	// LastUser is the text of the last user message (injected context
	// blocks such as <environment_context> aside); Scenario and Step are
	// what it chose.
	LastUser string
	Scenario Scenario
	Step     int
	// Tools names the tools offered ("exec_command", "apply_patch", a
	// namespace's tools as "namespace.name").
	Tools []string
	// Outputs are the tool outputs the request carries after the last user
	// message, in order.
	Outputs []Output
	// Items is how many input items the request carried.
	Items int
	// Header holds the request's headers.
	Header http.Header
	// Status is the HTTP status answered.
	Status int
}

// Output is one tool output a request carried back.
type Output struct {
	Type   string // function_call_output or custom_tool_call_output
	CallID string
	Output string
}

// Server is a running fake Responses API.
type Server struct {
	URL string

	mu       sync.Mutex
	timeout  time.Duration // of a SLOWTEXT pause
	requests []Request
	next     int // item and call id counter
	paused   int
	pauseCh  chan struct{} // closed and replaced at each pause
	release  chan struct{} // closed and replaced by Release
	srv      *http.Server
	ln       net.Listener
	done     chan struct{}
}

// Start serves on a random 127.0.0.1 port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake Responses API listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, pauseCh: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record(Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Status: http.StatusNotFound})
		writeError(w, http.StatusNotFound, "not_found", "no such path in the fake Responses API: "+r.URL.Path)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// BaseURL is the base_url a Codex model provider takes: the server's URL
// with /v1 (Codex posts to $base_url/responses).
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Close stops the server and ends the replies in flight.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Requests returns the calls recorded so far, oldest first (at most
// MaxRequests, the latest).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Paused is how many replies have reached a SLOWTEXT pause so far.
func (s *Server) Paused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// WaitPaused waits until at least n replies have reached a SLOWTEXT pause,
// or ctx ends.
func (s *Server) WaitPaused(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := s.paused, s.pauseCh
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d paused replies (%d so far): %w", n, got, ctx.Err())
		}
	}
}

// Release ends the SLOWTEXT pauses waiting now: their replies stream the
// rest of their text. Later pauses wait again.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
}

// SetPauseTimeout bounds the SLOWTEXT pauses that start from now on
// (DefaultPauseTimeout if d is not positive).
func (s *Server) SetPauseTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timeout = d
}

// pause holds a reply until Release, ctx's end or the pause timeout, and
// reports whether the reply should go on.
func (s *Server) pause(ctx context.Context) bool {
	s.mu.Lock()
	s.paused++
	close(s.pauseCh)
	s.pauseCh = make(chan struct{})
	rel := s.release
	timeout := s.timeout
	s.mu.Unlock()
	if timeout <= 0 {
		timeout = DefaultPauseTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-rel:
		return true
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) >= MaxRequests {
		n := copy(s.requests, s.requests[len(s.requests)-MaxRequests+1:])
		s.requests = s.requests[:n]
	}
	s.requests = append(s.requests, r)
}

// ids returns n fresh sequence numbers for item and call ids.
func (s *Server) ids(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.next + 1
	s.next += n
	return first
}

// apiRequest is the part of a Responses request the server reads.
type apiRequest struct {
	Model          string            `json:"model"`
	Stream         bool              `json:"stream"`
	Input          []json.RawMessage `json:"input"`
	Tools          []json.RawMessage `json:"tools"`
	PromptCacheKey string            `json:"prompt_cache_key"`
}

type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
	Name    string          `json:"name"`
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		rec.Status = http.StatusUnsupportedMediaType
		s.record(rec)
		writeError(w, rec.Status, "invalid_request_error", "the fake Responses API reads uncompressed bodies only, not "+enc)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		rec.Status = http.StatusBadRequest
		s.record(rec)
		writeError(w, rec.Status, "invalid_request_error", "reading the body: "+err.Error())
		return
	}
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		rec.Status = http.StatusBadRequest
		s.record(rec)
		writeError(w, rec.Status, "invalid_request_error", "decoding the body: "+err.Error())
		return
	}
	t := parseTurn(&req)
	rec.Model, rec.LastUser, rec.Scenario, rec.Step = req.Model, t.lastUser, t.scenario, t.step
	rec.Tools, rec.Outputs, rec.Items = toolNames(req.Tools), t.outputs, len(req.Input)
	rec.ThreadID = r.Header.Get("thread-id")
	if rec.ThreadID == "" {
		rec.ThreadID = req.PromptCacheKey
	}
	if !req.Stream {
		rec.Status = http.StatusBadRequest
		s.record(rec)
		writeError(w, rec.Status, "invalid_request_error", "the fake Responses API streams only (stream: true)")
		return
	}
	rec.Status = http.StatusOK
	s.record(rec)
	reply := script(t)
	s.stream(r.Context(), w, req.Model, reply)
}

// turn is what a request says about the turn it continues.
type turn struct {
	lastUser string
	scenario Scenario
	// step counts the tool calls the model made since the last user
	// message: 0 for a new prompt, 1 after the first call's output, …
	step    int
	outputs []Output
}

// parseTurn reads the last user message and what followed it.
func parseTurn(req *apiRequest) turn {
	var t turn
	last := -1
	for i, raw := range req.Input {
		var it inputItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		if it.Type == "message" && it.Role == "user" {
			if text := userText(it.Content); text != "" {
				last, t.lastUser = i, text
			}
		}
	}
	for _, raw := range req.Input[last+1:] {
		var it inputItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it.Type {
		case "function_call", "custom_tool_call":
			t.step++
		case "function_call_output", "custom_tool_call_output":
			t.outputs = append(t.outputs, Output{Type: it.Type, CallID: it.CallID, Output: outputText(it.Output)})
		}
	}
	t.scenario = Choose(t.lastUser)
	return t
}

// userText is the text of a user message's input_text parts, or "" for a
// message Codex injects (<environment_context>, <turn_aborted>, …).
func userText(content json.RawMessage) string {
	var str string
	if json.Unmarshal(content, &str) == nil {
		return injected(str)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &parts)
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "text" {
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(p.Text)
		}
	}
	return injected(sb.String())
}

func injected(s string) string {
	if strings.HasPrefix(strings.TrimSpace(s), "<") {
		return ""
	}
	return s
}

// outputText is a tool output as text: a string, or the text parts of a
// content list.
func outputText(raw json.RawMessage) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var sb strings.Builder
		for _, p := range parts {
			sb.WriteString(p.Text)
		}
		return sb.String()
	}
	var obj struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(raw, &obj)
	return obj.Content
}

func toolNames(tools []json.RawMessage) []string {
	var out []string
	for _, raw := range tools {
		var t struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		switch {
		case t.Type == "namespace":
			for _, sub := range t.Tools {
				out = append(out, t.Name+"."+sub.Name)
			}
		case t.Name != "":
			out = append(out, t.Name)
		default:
			out = append(out, t.Type)
		}
	}
	return out
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": typ, "message": msg}})
}
