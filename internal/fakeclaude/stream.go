package main

// Stream-json mode: `fakeclaude -p --input-format stream-json …` reads
// prompts and control messages on stdin and plays a scripted turn for each
// prompt on stdout, like `claude -p` in stream-json mode (see
// ../shared/design/claude-code-peer.md §6), and appends the conversation
// records to the session transcript like Claude does.
//
// The script is a JSON file named by $FAKE_CLAUDE_STREAM:
//
//	{"startupExit": 0, "stderr": "…", "repair": true,
//	 "turns": [{"steps": [...], "after": [...], "initExit": 0, "lateEcho": false}, ...]}
//
// With repair, a resumed session is repaired as Claude Code 2.1.330 does
// it, in the transcript only (nothing printed): a result for each call of
// the main agent left without one, then "No response requested." when the
// conversation ends with a user message.
//
// Turn i answers the i-th prompt (the last turn repeats); a "/clear" is
// run as Claude runs it (a new session; no turn answers it). With initExit the
// process exits with that code right after the turn's init, before it
// writes anything (Claude killed before its transcript exists). With
// lateEcho the prompt is written to the transcript at once but echoed on
// stdout only when the turn first prints something, as Claude Code 2.1.330
// echoes it once the model answers (a turn whose first step is exit is
// Claude killed while waiting for the model); with command as well, the
// prompt is a slash command, written as Claude Code records one
// (<command-name>/name</command-name>…<command-args>…</command-args>, under
// the name command gives when it is a string) and never echoed. Steps:
//
//	{"text": "…"}                     an assistant text message
//	{"stream": "a b c", "chunkMs": 20} text streamed word by word (stream_event deltas), then the message
//	{"tool": {...}}                    a tool call, see tool; with "ask" a can_use_tool request first
//	                                   (with "termResult" its result is printed, not written, on SIGTERM)
//	                                   (an id ending in "*" is made unique per call, its request too)
//	{"askPair": [{...}, {...}]}        two tool calls asked at once, answered in any order
//	{"agent": {...}}                   an Agent call (background unless "foreground")
//	{"sub": {"parent": "toolu_A", "agentId": "a1", "text": "…"}}  a subagent's text
//	{"notify": {"parent": "toolu_A", "agentId": "a1", "summary": "…"}}  task_notification
//	{"conv": {...}}                    a conversation message as it is (uuid, time and transcript added)
//	{"withdraw": {...}}                a tool call asked, then the request withdrawn (control_cancel_request) and the call failed
//	{"sleepMs": 100}
//	{"exit": 3}                        exit now, mid-turn
//
// "onStop" steps (top level) are played after the answer to a stop_task
// request and its task_updated: what Claude prints of a background subagent
// it stopped (its notification, the result of the tool it ran, its
// interruption line).
//
// "after" steps are played after the turn's result without a prompt (a
// background task finishing between turns); if they include a text, a
// result with origin task-notification follows. An interrupt control request
// cuts a step that waits (stream, ask, sleep) the way Claude does.
//
// $FAKE_CLAUDE_INLOG names a file where every prompt and setting read on
// stdin is appended as it arrives, one a line: "prompt TEXT", "model M",
// "mode M" (for tests of the order in which Claude gets them).

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ccrelay/ccrelay/claude"
)

type streamScript struct {
	StartupExit int    `json:"startupExit"`
	Stderr      string `json:"stderr"`
	OnStop      []step `json:"onStop"`
	Repair      bool   `json:"repair"`
	Turns       []struct {
		Steps    []step `json:"steps"`
		After    []step `json:"after"`
		InitExit int    `json:"initExit"`
		LateEcho bool   `json:"lateEcho"`
		Command  any    `json:"command"`
	} `json:"turns"`
}

type step struct {
	Text     string   `json:"text"`
	Stream   string   `json:"stream"`
	ChunkMS  int      `json:"chunkMs"`
	Tool     *tool    `json:"tool"`
	AskPair  []tool   `json:"askPair"`
	Agent    *agent   `json:"agent"`
	Sub      *subText `json:"sub"`
	Notify   *subText `json:"notify"`
	SleepMS  int      `json:"sleepMs"`
	Withdraw *tool    `json:"withdraw"`
	Exit     *int     `json:"exit"`
	// Raw is printed on stdout as it is (with the session id): a message
	// type the fake has no step for (rate_limit_event, …).
	Raw map[string]any `json:"raw"`
	// Conv is a conversation message printed and written to the
	// transcript with a uuid and time of its own (a subagent's tool result,
	// its interruption line, …).
	Conv map[string]any `json:"conv"`
}

type tool struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Ask    bool            `json:"ask"`
	Result string          `json:"result"`
	Parent string          `json:"parent"`
	Agent  string          `json:"agentId"`
	RunMS  int             `json:"runMs"` // how long the tool runs (interruptible)
	// TermResult: a SIGTERM while the tool runs makes Claude print the
	// tool's result with this text (an error) and exit, without writing
	// the result to its transcript, as Claude Code 2.1.330 stopped mid-tool
	// does at times ("Exit code 137").
	TermResult string `json:"termResult"`
	// unique is set for an id ending in "*": the star becomes a suffix
	// unique to this call, and the request asking for it is named after it
	// (ids that stay unique across prompts and restarted processes).
	unique bool
}

type agent struct {
	ID          string `json:"id"`
	AgentID     string `json:"agentId"`
	Prompt      string `json:"prompt"`
	Description string `json:"description"`
	Foreground  bool   `json:"foreground"`
}

type subText struct {
	Parent  string `json:"parent"`
	AgentID string `json:"agentId"`
	Text    string `json:"text"`
	Summary string `json:"summary"`
}

type streamer struct {
	session    string
	transcript transcriptFile
	// echo is the echo of the prompt that lateEcho holds back until the
	// turn first prints.
	echo       map[string]any
	outMu      sync.Mutex
	prompts    chan string
	answers    chan map[string]any // control_response payloads by request
	interrupts chan struct{}
	msgN       int
	reqN       int
	setMu      sync.Mutex
	model      string // as set_model left it
	permMode   string
	lastUUID   string
	onStop     []step  // played after a stop_task (owned by the stdin reader)
	cost       float64 // total_cost_usd so far: Claude reports the process's running total
	// running is the tool running now whose result a SIGTERM prints
	// (TermResult), or nil.
	termMu  sync.Mutex
	running *tool
}

// playing is the streamer of this process, for terminating.
var playing atomic.Pointer[streamer]

// terminating is called with the signal that ends the process: a SIGTERM
// while a tool with a TermResult runs prints that result, not written to
// the transcript.
func terminating(sig os.Signal) {
	s := playing.Load()
	if s == nil || sig != syscall.SIGTERM {
		return
	}
	s.termMu.Lock()
	t := s.running
	s.termMu.Unlock()
	if t == nil {
		return
	}
	s.emit(map[string]any{"type": "user", "uuid": claude.NewSessionID(), "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"parent_tool_use_id": nil, "message": map[string]any{"role": "user", "content": []map[string]any{{
			"type": "tool_result", "tool_use_id": t.ID, "content": t.TermResult, "is_error": true}}}}, false)
}

// transcriptFile is where the session's records go.
type transcriptFile interface {
	Write([]byte) (int, error)
	Name() string
}

func runStream(session string, transcript transcriptFile, path, model, permMode string, resumed bool) error {
	var sc streamScript
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &sc); err != nil {
			return fmt.Errorf("stream script: %w", err)
		}
	}
	if sc.StartupExit != 0 {
		fmt.Fprintln(os.Stderr, sc.Stderr)
		os.Exit(sc.StartupExit)
	}
	s := &streamer{session: session, transcript: transcript, model: model, permMode: permMode, prompts: make(chan string, 16),
		answers: make(chan map[string]any, 16), interrupts: make(chan struct{}, 4), onStop: sc.OnStop}
	if sc.Repair && resumed {
		s.repair()
	}
	playing.Store(s)
	go s.readStdin()
	// Turns count across processes of the session (a resumed session goes
	// on with the next turn of the script).
	counter := transcript.Name() + ".turns"
	n0, _ := os.ReadFile(counter)
	start, _ := strconv.Atoi(string(n0))
	for n := start; ; n++ {
		prompt, ok := <-s.prompts
		if !ok {
			return nil // stdin closed: Claude exits
		}
		if strings.TrimSpace(prompt) == "/clear" {
			// Claude runs it itself, and goes on in a new session; no
			// turn of the script answers it.
			if err := s.clear(); err != nil {
				return err
			}
			counter = s.transcript.Name() + ".turns"
			n--
			continue
		}
		os.WriteFile(counter, []byte(strconv.Itoa(n+1)), 0o644)
		// The settings as they are when init goes out (a change comes
		// before or after it on stdout, never in between).
		s.setMu.Lock()
		s.emit(map[string]any{"type": "system", "subtype": "init", "model": s.model, "permissionMode": s.permMode}, false)
		s.setMu.Unlock()
		echo := map[string]any{"type": "user", "isReplay": true, "message": map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": prompt}}}}
		if len(sc.Turns) == 0 {
			s.conv(echo)
			s.text("ok", "", "")
			s.result("success", "completed", nil)
			continue
		}
		turn := sc.Turns[min(n, len(sc.Turns)-1)]
		if turn.InitExit != 0 {
			os.Exit(turn.InitExit)
		}
		if turn.LateEcho && turn.Command != nil {
			name, args, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(prompt), "/"), " ")
			if alias, ok := turn.Command.(string); ok {
				name = alias
			}
			s.record(map[string]any{"type": "user", "message": map[string]any{"role": "user",
				"content": "<command-name>/" + name + "</command-name>\n            <command-message>" + name +
					"</command-message>\n            <command-args>" + strings.TrimSpace(args) + "</command-args>"}})
		} else if turn.LateEcho {
			s.record(echo)
			s.echo = echo
		} else {
			s.conv(echo)
		}
		if s.play(turn.Steps) {
			s.result("success", "completed", nil)
		}
		if len(turn.After) > 0 {
			talked := false
			for _, st := range turn.After {
				talked = talked || st.Text != ""
			}
			s.play(turn.After)
			if talked {
				s.result("success", "completed", map[string]any{"kind": "task-notification"})
			}
		}
	}
}

// clear does what Claude Code 2.1.330 does with a /clear in stream-json
// mode: no echo, a conversation_reset naming the command's record, and
// an init and a result of a new session (not the reset's
// new_conversation_id), whose transcript starts with the command.
func (s *streamer) clear() error {
	cmd := claude.NewSessionID()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	s.emit(map[string]any{"type": "conversation_reset", "new_conversation_id": claude.NewSessionID(), "uuid": claude.NewSessionID(),
		"trigger": "clear", "user_message_uuid": cmd, "timestamp": now}, false)
	session := claude.NewSessionID()
	f, err := os.OpenFile(filepath.Join(filepath.Dir(s.transcript.Name()), session+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.outMu.Lock()
	s.session, s.transcript = session, f
	s.outMu.Unlock()
	rec, _ := json.Marshal(map[string]any{"type": "user", "uuid": cmd, "sessionId": session, "timestamp": now, "isSidechain": false,
		"message": map[string]any{"role": "user", "content": "<command-name>/clear</command-name>\n            <command-message>clear</command-message>\n            <command-args></command-args>"}})
	if _, err := f.Write(append(rec, '\n')); err != nil {
		return err
	}
	s.setMu.Lock()
	s.emit(map[string]any{"type": "system", "subtype": "init", "model": s.model, "permissionMode": s.permMode}, false)
	s.setMu.Unlock()
	s.emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 0, "uuid": claude.NewSessionID(),
		"usage": map[string]any{"input_tokens": 0, "output_tokens": 0}, "total_cost_usd": 0}, false)
	s.cost = 0
	return nil
}

func (s *streamer) readStdin() {
	defer close(s.prompts)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
			Message   struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"message"`
			Request  map[string]any `json:"request"`
			Response struct {
				RequestID string         `json:"request_id"`
				Response  map[string]any `json:"response"`
			} `json:"response"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch m.Type {
		case "user":
			var text string
			for _, c := range m.Message.Content {
				text += c.Text
			}
			inlog("prompt " + text)
			s.prompts <- text
		case "control_response":
			a := m.Response.Response
			if a == nil {
				a = map[string]any{}
			}
			a["request_id"] = m.Response.RequestID
			s.answers <- a
		case "control_request":
			sub, _ := m.Request["subtype"].(string)
			resp := map[string]any{}
			var stopped any // the task stop_task ended
			switch sub {
			case "interrupt":
				resp["still_queued"] = []any{}
				select {
				case s.interrupts <- struct{}{}:
				default:
				}
			case "set_model":
				resp["model"] = m.Request["model"]
				inlog(fmt.Sprint("model ", m.Request["model"]))
				s.setMu.Lock()
				s.model = fmt.Sprint(m.Request["model"])
			case "stop_task":
				// The task stops: Claude says so with task_updated.
				inlog(fmt.Sprint("stop_task ", m.Request["task_id"]))
				stopped = m.Request["task_id"]
			case "set_permission_mode":
				resp["mode"] = m.Request["mode"]
				inlog(fmt.Sprint("mode ", m.Request["mode"]))
				s.setMu.Lock()
				s.permMode = fmt.Sprint(m.Request["mode"])
			}
			s.emit(map[string]any{"type": "control_response", "response": map[string]any{
				"subtype": "success", "request_id": m.RequestID, "response": resp}}, false)
			if sub == "set_model" || sub == "set_permission_mode" {
				s.setMu.Unlock()
			}
			if stopped != nil {
				s.emit(map[string]any{"type": "system", "subtype": "task_updated", "task_id": stopped,
					"patch": map[string]any{"status": "killed"}, "uuid": claude.NewSessionID()}, false)
				s.playStopped(s.onStop)
			}
		}
	}
}

// uniqueSuffix is a random suffix for a tool id ending in "*".
func uniqueSuffix() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// inlog appends line to $FAKE_CLAUDE_INLOG, if set.
func inlog(line string) {
	p := os.Getenv("FAKE_CLAUDE_INLOG")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

func (s *streamer) emit(m map[string]any, record bool) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.echo != nil && m["type"] != "control_response" {
		// The prompt held back (lateEcho) comes before what the turn
		// prints first.
		b, _ := json.Marshal(s.echo)
		os.Stdout.Write(append(b, '\n'))
		s.echo = nil
	}
	if _, ok := m["session_id"]; !ok {
		m["session_id"] = s.session
	}
	b, _ := json.Marshal(m)
	os.Stdout.Write(append(b, '\n'))
	if record && s.transcript != nil {
		delete(m, "session_id")
		delete(m, "isReplay")
		m["sessionId"] = s.session
		// Claude Code writes its working folder on every record.
		if cwd, err := os.Getwd(); err == nil {
			m["cwd"] = cwd
		}
		if m["parent_tool_use_id"] != nil {
			m["isSidechain"] = true
			m["agentId"] = m["agent_id"]
			delete(m, "parent_tool_use_id")
			delete(m, "agent_id")
		}
		b, _ := json.Marshal(m)
		s.transcript.Write(append(b, '\n'))
	}
}

// record writes a conversation message (with uuid and timestamp) to the
// transcript only; the same message, printed later, is its echo.
func (s *streamer) record(m map[string]any) {
	m["uuid"] = claude.NewSessionID()
	m["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
	m["session_id"] = s.session
	s.outMu.Lock()
	defer s.outMu.Unlock()
	t := maps.Clone(m)
	delete(t, "session_id")
	delete(t, "isReplay")
	t["sessionId"] = s.session
	if cwd, err := os.Getwd(); err == nil {
		t["cwd"] = cwd
	}
	b, _ := json.Marshal(t)
	s.transcript.Write(append(b, '\n'))
}

// conv emits a conversation message (with uuid and timestamp) and writes it
// to the transcript.
func (s *streamer) conv(m map[string]any) {
	m["uuid"] = claude.NewSessionID()
	m["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
	if _, ok := m["parent_tool_use_id"]; !ok {
		m["parent_tool_use_id"] = nil
	}
	s.emit(m, true)
}

func (s *streamer) nextMsg() string {
	s.msgN++
	return fmt.Sprintf("msg_fake%04d", s.msgN)
}

func (s *streamer) assistant(blocks []map[string]any, parent, agentID string, extra map[string]any) {
	m := map[string]any{"type": "assistant", "message": map[string]any{"id": s.nextMsg(), "role": "assistant", "model": "fake-model",
		"content": blocks, "stop_reason": nil, "usage": map[string]any{"input_tokens": 3, "output_tokens": 2}}}
	if parent != "" {
		m["parent_tool_use_id"], m["agent_id"] = parent, agentID
	}
	for k, v := range extra {
		m[k] = v
	}
	s.conv(m)
}

func (s *streamer) text(t, parent, agentID string) {
	s.assistant([]map[string]any{{"type": "text", "text": t}}, parent, agentID, nil)
}

func (s *streamer) result(subtype, terminal string, origin map[string]any) {
	s.cost += 0.0012
	m := map[string]any{"type": "result", "subtype": subtype, "is_error": subtype != "success", "terminal_reason": terminal,
		"uuid": claude.NewSessionID(), "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}, "total_cost_usd": s.cost}
	if origin != nil {
		m["origin"] = origin
	}
	s.emit(m, false)
}

// wait pauses for d; it reports false if an interrupt came first.
func (s *streamer) wait(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-s.interrupts:
		return false
	}
}

func (s *streamer) cut(forTool bool) {
	marker, terminal := claude.InterruptedText, "aborted_streaming"
	if forTool {
		marker, terminal = claude.InterruptedForToolText, "aborted_tools"
	}
	s.conv(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": marker}}}})
	s.result("error_during_execution", terminal, nil)
}

func (s *streamer) toolResult(id, parent, agentID, content string, isErr bool, extra map[string]any) {
	m := map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []map[string]any{{
		"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isErr}}}}
	if parent != "" {
		m["parent_tool_use_id"], m["agent_id"] = parent, agentID
	}
	for k, v := range extra {
		m[k] = v
	}
	s.conv(m)
}

func (s *streamer) toolUse(t tool) {
	in := t.Input
	if len(in) == 0 {
		in = json.RawMessage("{}")
	}
	s.assistant([]map[string]any{{"type": "tool_use", "id": t.ID, "name": t.Name, "input": in}}, t.Parent, t.Agent, nil)
}

func (s *streamer) ask(t tool) string {
	s.reqN++
	id := fmt.Sprintf("req-%d", s.reqN)
	if t.unique {
		id = "req-" + t.ID
	}
	in := t.Input
	if len(in) == 0 {
		in = json.RawMessage("{}")
	}
	req := map[string]any{"subtype": "can_use_tool", "tool_name": t.Name, "display_name": t.Name, "input": in,
		"tool_use_id": t.ID, "description": "run " + t.Name,
		"permission_suggestions": []map[string]any{{"type": "addRules", "rules": []map[string]string{{"toolName": t.Name}}, "behavior": "allow", "destination": "localSettings"}}}
	if t.Agent != "" {
		req["agent_id"] = t.Agent
	}
	s.emit(map[string]any{"type": "control_request", "request_id": id, "request": req}, false)
	return id
}

// answered applies the app's answer to t.
func (s *streamer) answered(t tool, a map[string]any) {
	if a["behavior"] == "allow" {
		upd, _ := json.Marshal(a["updatedInput"])
		out := t.Result
		if out == "" {
			out = "done"
		}
		if t.TermResult != "" {
			s.termMu.Lock()
			s.running = &t
			s.termMu.Unlock()
		}
		ran := s.wait(time.Duration(t.RunMS) * time.Millisecond)
		s.termMu.Lock()
		s.running = nil
		s.termMu.Unlock()
		if !ran {
			s.toolResult(t.ID, t.Parent, t.Agent, "The user doesn't want to proceed with this tool use. The tool use was rejected.", true, nil)
			s.cut(true)
			panic(errCut)
		}
		extra := map[string]any{}
		if p, ok := a["updatedPermissions"]; ok {
			extra["tool_result_meta"] = map[string]any{"updatedPermissions": p}
			out += " (allowed for the session)"
		}
		s.toolResult(t.ID, t.Parent, t.Agent, out+" input="+string(upd), false, extra)
		return
	}
	if a["interrupt"] == true {
		s.toolResult(t.ID, t.Parent, t.Agent, "The user doesn't want to proceed with this tool use. The tool use was rejected.", true, nil)
		s.cut(true)
		panic(errCut)
	}
	msg, _ := a["message"].(string)
	s.toolResult(t.ID, t.Parent, t.Agent, msg, true, nil)
}

type cutError struct{}

func (cutError) Error() string { return "interrupted" }

var errCut = cutError{}

// play runs steps; it reports false if the turn was cut (its result is
// written already).
func (s *streamer) play(steps []step) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != errCut {
				panic(r)
			}
			ok = false
		}
	}()
	// An interrupt that came while idle does not cut the next turn.
	for len(s.interrupts) > 0 {
		<-s.interrupts
	}
	for _, st := range steps {
		switch {
		case st.Exit != nil:
			os.Exit(*st.Exit)
		case st.Raw != nil:
			s.raw(st.Raw)
		case st.Conv != nil:
			s.conv(maps.Clone(st.Conv))
		case st.SleepMS > 0:
			if !s.wait(time.Duration(st.SleepMS) * time.Millisecond) {
				s.cut(false)
				return false
			}
		case st.Text != "":
			s.text(st.Text, "", "")
		case st.Stream != "":
			msg := fmt.Sprintf("msg_fake%04d", s.msgN+1)
			var sent strings.Builder
			words := strings.SplitAfter(st.Stream, " ")
			for i, w := range words {
				if i > 0 && !s.wait(time.Duration(st.ChunkMS)*time.Millisecond) {
					s.assistant([]map[string]any{{"type": "text", "text": sent.String()}}, "", "", map[string]any{"aborted": true})
					s.cut(false)
					return false
				}
				sent.WriteString(w)
				s.emit(map[string]any{"type": "stream_event", "uuid": claude.NewSessionID(), "parent_tool_use_id": nil, "api_message_id": msg,
					"event": map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": w}}}, false)
			}
			s.text(st.Stream, "", "")
		case st.Withdraw != nil:
			t := *st.Withdraw
			s.toolUse(t)
			id := s.ask(t)
			s.emit(map[string]any{"type": "control_cancel_request", "request_id": id}, false)
			s.toolResult(t.ID, t.Parent, t.Agent, "The tool call was cancelled.", true, nil)
		case st.Tool != nil:
			t := *st.Tool
			if base, ok := strings.CutSuffix(t.ID, "*"); ok {
				t.ID, t.unique = base+uniqueSuffix(), true
			}
			s.toolUse(t)
			if !t.Ask {
				s.answered(t, map[string]any{"behavior": "allow", "updatedInput": t.Input})
				continue
			}
			id := s.ask(t)
			s.answered(t, s.answer(id, t))
		case len(st.AskPair) > 0:
			ids := map[string]tool{}
			var order []string
			for _, t := range st.AskPair {
				s.toolUse(t)
			}
			for _, t := range st.AskPair {
				id := s.ask(t)
				ids[id] = t
				order = append(order, id)
			}
			got := map[string]map[string]any{}
			for len(got) < len(order) {
				select {
				case a := <-s.answers:
					if id, _ := a["request_id"].(string); ids[id].ID != "" {
						got[id] = a
					}
				case <-s.interrupts:
					for _, id := range order {
						if got[id] == nil {
							s.toolResult(ids[id].ID, "", "", "The user doesn't want to proceed with this tool use.", true, nil)
						}
					}
					s.cut(true)
					return false
				}
			}
			for _, id := range order {
				s.answered(ids[id], got[id])
			}
		case st.Agent != nil:
			a := st.Agent
			in, _ := json.Marshal(map[string]any{"description": a.Description, "prompt": a.Prompt, "subagent_type": "general-purpose", "run_in_background": !a.Foreground})
			s.toolUse(tool{ID: a.ID, Name: "Agent", Input: in})
			s.emit(map[string]any{"type": "system", "subtype": "task_started", "task_id": a.AgentID, "tool_use_id": a.ID,
				"description": a.Description, "prompt": a.Prompt, "is_backgrounded": !a.Foreground, "uuid": claude.NewSessionID()}, false)
			if a.Foreground {
				s.conv(map[string]any{"type": "user", "parent_tool_use_id": a.ID, "agent_id": a.AgentID,
					"message": map[string]any{"role": "user", "content": a.Prompt}})
			} else {
				s.toolResult(a.ID, "", "", "Async agent launched successfully.", false,
					map[string]any{"tool_use_result": map[string]any{"status": "async_launched", "agentId": a.AgentID}})
			}
		case st.Sub != nil:
			s.text(st.Sub.Text, st.Sub.Parent, st.Sub.AgentID)
		case st.Notify != nil:
			s.emit(map[string]any{"type": "system", "subtype": "task_notification", "task_id": st.Notify.AgentID,
				"tool_use_id": st.Notify.Parent, "status": "completed", "summary": st.Notify.Summary, "uuid": claude.NewSessionID()}, false)
		}
	}
	return true
}

// raw prints a copy of line as it is, with a uuid of its own when it has
// none.
func (s *streamer) raw(line map[string]any) {
	m := maps.Clone(line)
	if _, ok := m["uuid"]; !ok {
		m["uuid"] = claude.NewSessionID()
	}
	s.emit(m, false)
}

// playStopped plays what Claude prints of a background subagent it stopped:
// raw lines, conversation messages and notifications only (it runs beside
// the turn, from the stdin reader).
func (s *streamer) playStopped(steps []step) {
	for _, st := range steps {
		switch {
		case st.Raw != nil:
			s.raw(st.Raw)
		case st.Conv != nil:
			s.conv(maps.Clone(st.Conv))
		case st.Sub != nil:
			s.text(st.Sub.Text, st.Sub.Parent, st.Sub.AgentID)
		}
	}
}

// answer waits for the control_response to request id; an interrupt
// instead cuts the turn.
func (s *streamer) answer(id string, t tool) map[string]any {
	for {
		select {
		case a := <-s.answers:
			if a["request_id"] == id {
				return a
			}
		case <-s.interrupts:
			s.toolResult(t.ID, t.Parent, t.Agent, "The user doesn't want to proceed with this tool use. The tool use was rejected.", true, nil)
			s.cut(true)
			panic(errCut)
		}
	}
}

// SessionEndedResult is the result Claude Code 2.1.330 records for a call
// whose session ended before its result was recorded.
const SessionEndedResult = "[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown. Check whether it took effect before relying on it or running it again.]"

// repair writes what Claude Code writes when it resumes a conversation it
// left unfinished (not printed).
func (s *streamer) repair() {
	b, err := os.ReadFile(s.transcript.Name())
	if err != nil {
		return
	}
	var open []string // calls of the main agent without a result
	last, lastUUID := "", ""
	for _, l := range strings.Split(string(b), "\n") {
		r, err := claude.Parse([]byte(l))
		if err != nil || r.UUID == "" || r.IsSidechain || r.Message == nil || (r.Type != claude.TypeUser && r.Type != claude.TypeAssistant) {
			continue
		}
		last, lastUUID = r.Type, r.UUID
		for _, b := range r.Message.Content.Blocks {
			switch {
			case r.Type == claude.TypeAssistant && b.Type == "tool_use":
				open = append(open, b.ID)
			case r.Type == claude.TypeUser && b.Type == "tool_result":
				for i, id := range open {
					if id == b.ToolUseID {
						open = append(open[:i], open[i+1:]...)
						break
					}
				}
			}
		}
	}
	write := func(m map[string]any) {
		m["uuid"], m["parentUuid"], m["sessionId"] = claude.NewSessionID(), lastUUID, s.session
		m["timestamp"], m["isSidechain"] = time.Now().UTC().Format(time.RFC3339Nano), false
		lastUUID = m["uuid"].(string)
		b, _ := json.Marshal(m)
		s.transcript.Write(append(b, '\n'))
	}
	for _, id := range open {
		write(map[string]any{"type": "user", "toolUseResult": SessionEndedResult, "message": map[string]any{"role": "user", "content": []map[string]any{
			{"type": "tool_result", "tool_use_id": id, "is_error": true, "content": SessionEndedResult}}}})
		last = claude.TypeUser
	}
	if last == claude.TypeUser {
		write(map[string]any{"type": "assistant", "message": map[string]any{"id": claude.NewSessionID(), "role": "assistant", "model": claude.SyntheticModel,
			"content": []map[string]any{{"type": "text", "text": claude.NoResponseText}}}})
	}
}
