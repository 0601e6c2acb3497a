package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// codexRecorder is the feed and the events of a CodexRemote under test.
type codexRecorder struct {
	mu     sync.Mutex
	notes  []string
	states []SessionState
	live   []string
	moved  chan struct{}
}

func newCodexRecorder() *codexRecorder { return &codexRecorder{moved: make(chan struct{}, 1000)} }

func (c *codexRecorder) Note(_ context.Context, session, source, text string, _ int64) error {
	c.mu.Lock()
	c.notes = append(c.notes, session+"|"+text)
	c.mu.Unlock()
	c.poke()
	return nil
}

func (c *codexRecorder) State(session string, st SessionState) {
	c.mu.Lock()
	c.states = append(c.states, st)
	c.mu.Unlock()
	c.poke()
}

func (c *codexRecorder) Live(session string, payload json.RawMessage) {
	c.mu.Lock()
	c.live = append(c.live, string(payload))
	c.mu.Unlock()
	c.poke()
}

func (c *codexRecorder) poke() {
	select {
	case c.moved <- struct{}{}:
	default:
	}
}

// waitFor polls cond on every change, up to a generous deadline.
func (c *codexRecorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.moved:
		case <-tick.C:
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("timed out waiting for %s; notes %q, states %+v", what, c.notes, c.states)
		}
	}
}

func (c *codexRecorder) last() SessionState {
	if len(c.states) == 0 {
		return SessionState{}
	}
	return c.states[len(c.states)-1]
}

// fakeCodex is a CodexRemote on the scripted app-server.
type fakeCodex struct {
	r   *CodexRemote
	rec *codexRecorder
	log string
}

func startFakeCodex(t *testing.T, sc fakeScript) *fakeCodex {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	b, _ := json.Marshal(sc)
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCodex{rec: newCodexRecorder(), log: filepath.Join(dir, "client.jsonl")}
	env := append(os.Environ(), fakeAppServerEnv+"=1", fakeAppServerScript+"="+script, fakeAppServerLog+"="+f.log)
	f.r = NewCodexRemote(CodexRemoteOptions{Codex: self, Dir: dir, Env: env, StopTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, f.rec, f.rec)
	t.Cleanup(f.r.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	thread, err := f.r.Start(ctx)
	if err != nil || thread != fakeThreadID {
		t.Fatalf("Start: %q %v", thread, err)
	}
	return f
}

// answers are the client's answers to app-server's requests, as the fake
// logged them: the line of each response, by id.
func (f *fakeCodex) answers(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) == nil && m.Method == "" && len(m.ID) > 0 {
			out[string(m.ID)] = string(line)
		}
	}
	return out
}

// sent is the client's requests of a method, as the fake logged them.
func (f *fakeCodex) sent(t *testing.T, method string) []string {
	t.Helper()
	b, _ := os.ReadFile(f.log)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"method":"`+method+`"`) {
			out = append(out, line)
		}
	}
	return out
}

// waitAnswer waits for the answer to request id and returns its result
// or error, as compact JSON.
func (f *fakeCodex) waitAnswer(t *testing.T, id string) string {
	t.Helper()
	var got string
	f.rec.waitFor(t, "the answer to request "+id, func() bool {
		line, ok := f.answers(t)[id]
		if !ok {
			return false
		}
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(line), &m)
		delete(m, "id")
		b, _ := json.Marshal(m)
		got = string(b)
		return true
	})
	return got
}

func (f *fakeCodex) prompt(t *testing.T, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.r.Prompt(ctx, text); err != nil {
		t.Fatalf("Prompt: %v", err)
	}
}

func params(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

const fakeTurn = "turn-1"

// Every request app-server can send is answered: an approval the app can
// answer is shown and answered with the app's answer; anything else,
// unknown methods included, is declined at once with a note the app
// shows.
func TestCodexRemoteRequests(t *testing.T) {
	change := fakeStep{Notify: codex.NotifyItemStarted, Params: params(map[string]any{"threadId": fakeThreadID, "turnId": fakeTurn,
		"item": map[string]any{"type": "fileChange", "id": "call_0013", "status": "inProgress",
			"changes": []map[string]any{{"path": "/p/hello.txt", "kind": map[string]any{"type": "add"}, "diff": "@@ -0,0 +1 @@\n+hello\n"}}}})}
	type app struct {
		allow, forSession bool
		input             json.RawMessage
		reason            string
	}
	for _, tc := range []struct {
		name  string
		steps []fakeStep
		// shown: the request the app is shown (its tool and a piece of its
		// input), answered with answer; otherwise declined at once.
		shownTool, shownInput string
		// reasonRead: the request shown says a denial's reason reaches
		// Codex (the app's box asks for a reason, not a note).
		reasonRead bool
		answer     app
		want       string // the answer app-server gets
		note       string // a note the app is shown ("" none)
	}{
		{name: "command accepted", steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0007", "command": "echo hi > x.txt", "cwd": "/p",
			"reason": "Do you allow writing x.txt?", "startedAtMs": 1})}},
			shownTool: "Bash", shownInput: `"command":"echo hi \u003e x.txt"`, answer: app{allow: true},
			want: `{"result":{"decision":"accept"}}`},
		{name: "command for the session", steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0007", "command": "make test", "startedAtMs": 1})}},
			shownTool: "Bash", shownInput: `"command":"make test"`, answer: app{allow: true, forSession: true},
			want: `{"result":{"decision":"acceptForSession"}}`},
		{name: "command declined", steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0008", "command": "rm -rf build", "startedAtMs": 1})}},
			shownTool: "Bash", shownInput: `"command":"rm -rf build"`, answer: app{reason: "not now"},
			want: `{"result":{"decision":"decline"}}`, note: "Denied from the app: not now"},
		{name: "file change declined", steps: []fakeStep{change, {Request: codex.RequestFileChangeApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0013", "startedAtMs": 1})}},
			shownTool: "apply_patch", shownInput: `"diff":"@@ -0,0 +1 @@\n+hello\n"`, answer: app{reason: "wrong file"},
			want: `{"result":{"decision":"decline"}}`, note: "Denied from the app: wrong file"},
		{name: "file change accepted", steps: []fakeStep{change, {Request: codex.RequestFileChangeApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0013", "startedAtMs": 1})}},
			shownTool: "apply_patch", shownInput: `"path":"/p/hello.txt"`, answer: app{allow: true},
			want: `{"result":{"decision":"accept"}}`},
		{name: "legacy exec denied with a reason", steps: []fakeStep{{Request: codex.RequestLegacyExec, Params: params(map[string]any{
			"callId": "c1", "conversationId": fakeThreadID, "command": []string{"bash", "-lc", "ls"}, "cwd": "/p", "parsedCmd": []any{}})}},
			shownTool: "Bash", shownInput: `"command":"bash -lc ls"`, reasonRead: true, answer: app{reason: "not in this folder"},
			want: `{"result":{"decision":{"denied":{"rejection":"not in this folder"}}}}`},
		{name: "legacy patch denied with a reason", steps: []fakeStep{{Request: codex.RequestLegacyPatch, Params: params(map[string]any{
			"callId": "c2", "conversationId": fakeThreadID, "fileChanges": map[string]any{"a.txt": map[string]any{"type": "add", "content": "x"}}})}},
			shownTool: "apply_patch", shownInput: `"a.txt"`, reasonRead: true, answer: app{reason: "wrong file"},
			want: `{"result":{"decision":{"denied":{"rejection":"wrong file"}}}}`},
		{name: "legacy patch approved", steps: []fakeStep{{Request: codex.RequestLegacyPatch, Params: params(map[string]any{
			"callId": "c2", "conversationId": fakeThreadID, "fileChanges": map[string]any{"a.txt": map[string]any{"type": "add", "content": "x"}}})}},
			shownTool: "apply_patch", shownInput: `"a.txt"`, reasonRead: true, answer: app{allow: true},
			want: `{"result":{"decision":"approved"}}`},
		{name: "permissions granted", steps: []fakeStep{{Request: codex.RequestPermissions, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "p1", "cwd": "/p", "reason": "network", "startedAtMs": 1,
			"permissions": map[string]any{"network": map[string]any{"enabled": true}}})}},
			shownTool: "Permissions", shownInput: `"enabled":true`, answer: app{allow: true},
			want: `{"result":{"permissions":{"network":{"enabled":true}},"scope":"turn"}}`},
		{name: "permissions refused", steps: []fakeStep{{Request: codex.RequestPermissions, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "p1", "cwd": "/p", "startedAtMs": 1,
			"permissions": map[string]any{"network": map[string]any{"enabled": true}}})}},
			shownTool: "Permissions", shownInput: `"enabled":true`, answer: app{},
			want: `{"result":{"permissions":{},"scope":"turn"}}`},
		{name: "permissions refused with a reason", steps: []fakeStep{{Request: codex.RequestPermissions, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "p1", "cwd": "/p", "startedAtMs": 1,
			"permissions": map[string]any{"network": map[string]any{"enabled": true}}})}},
			shownTool: "Permissions", shownInput: `"enabled":true`, answer: app{reason: "no network today"},
			want: `{"result":{"permissions":{},"scope":"turn"}}`, note: "Denied from the app: no network today"},
		{name: "user input without choices", steps: []fakeStep{{Request: codex.RequestUserInput, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_9", "isBlocking": true,
			"questions": []map[string]any{{"id": "q1", "header": "Colour", "question": "Which colour should the button be?"}}})}},
			want: `{"result":{"answers":{}}}`, note: "Codex asked: Which colour should the button be?"},
		{name: "user input answered", steps: []fakeStep{{Request: codex.RequestUserInput, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_9", "isBlocking": true,
			"questions": []map[string]any{{"id": "q1", "header": "Colour", "question": "Which colour?",
				"options": []map[string]string{{"label": "Blue", "description": "calm"}, {"label": "Red", "description": "loud"}}}}})}},
			shownTool: "AskUserQuestion", shownInput: `"label":"Red"`,
			answer: app{allow: true, input: json.RawMessage(`{"questions":[],"answers":{"Which colour?":"Red"}}`)},
			want:   `{"result":{"answers":{"q1":{"answers":["Red"]}}}}`},
		{name: "user input refused", steps: []fakeStep{{Request: codex.RequestUserInput, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_9", "isBlocking": true,
			"questions": []map[string]any{{"id": "q1", "header": "Colour", "question": "Which colour?",
				"options": []map[string]string{{"label": "Blue", "description": "calm"}}}}})}},
			shownTool: "AskUserQuestion", shownInput: `"label":"Blue"`, answer: app{reason: "decide yourself"},
			want: `{"result":{"answers":{}}}`, note: "Not answered from the app: decide yourself"},
		{name: "elicitation", steps: []fakeStep{{Request: codex.RequestElicitation, Params: params(map[string]any{
			"threadId": fakeThreadID, "serverName": "tracker", "mode": "form", "message": "Pick a project", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}})}},
			want: `{"result":{"action":"decline","content":null}}`, note: "The MCP server tracker asked: Pick a project"},
		{name: "dynamic tool", steps: []fakeStep{{Request: codex.RequestDynamicTool, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "callId": "d1", "tool": "lookup", "arguments": map[string]any{}})}},
			want: `{"result":{"contentItems":[{"text":"ccrelay declined it: ccrelay provides no tools of its own","type":"inputText"}],"success":false}}`,
			note: "Codex called the tool lookup"},
		{name: "login refresh", steps: []fakeStep{{Request: codex.RequestAuthRefresh, Params: params(map[string]any{"reason": "unauthorized"})}},
			want: `{"error":{"code":-32000,"message":"ccrelay declined it: ccrelay cannot log in to ChatGPT for Codex"}}`, note: "Codex asked for a new ChatGPT login"},
		{name: "attestation", steps: []fakeStep{{Request: codex.RequestAttestation, Params: params(map[string]any{})}},
			want: `{"error":{"code":-32000,"message":"ccrelay declined it: ccrelay cannot attest this client"}}`, note: "attestation"},
		{name: "unknown request", steps: []fakeStep{{Request: "item/teleport/requestApproval", Params: params(map[string]any{"threadId": fakeThreadID})}},
			want: `{"error":{"code":-32601,"message":"ccrelay does not handle item/teleport/requestApproval: ccrelay declined it: ccrelay does not know this request"}}`,
			note: "Codex sent the request item/teleport/requestApproval. ccrelay declined it"},
		{name: "an id too long for the app's answer", steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_" + strings.Repeat("7", protocol.MaxFieldBytes), "command": "ls", "startedAtMs": 1})}},
			want: `{"result":{"decision":"decline"}}`, note: "ccrelay declined it: its id is longer than an answer from the app can name"},
		{name: "request over the line bound", steps: []fakeStep{{ID: 7, Raw: `{"method":"item/commandExecution/requestApproval","id":7,"params":{"command":"` +
			strings.Repeat("x", codex.MaxMessage) + `"}}`}},
			want: `{"result":{"decision":"decline"}}`, note: "ccrelay declined it: the request was too large or not readable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeCodex(t, fakeScript{Steps: tc.steps})
			f.prompt(t, "go")
			id := "101"
			if tc.steps[len(tc.steps)-1].ID > 0 {
				id = "7"
			} else if len(tc.steps) == 2 {
				id = "102"
			}
			if tc.shownTool != "" {
				var pr PermissionRequest
				f.rec.waitFor(t, "the request shown", func() bool {
					st := f.rec.last()
					if len(st.Permissions) == 1 && st.Status == StatusPermission {
						pr = st.Permissions[0]
						return true
					}
					return false
				})
				if pr.Tool != tc.shownTool || !strings.Contains(string(pr.Input), tc.shownInput) {
					t.Errorf("shown %s %s, want %s with %s", pr.Tool, pr.Input, tc.shownTool, tc.shownInput)
				}
				if pr.ReasonRead != tc.reasonRead {
					t.Errorf("shown with reasonRead %v, want %v", pr.ReasonRead, tc.reasonRead)
				}
				// What the app is shown matches what is sent: a denial's
				// reason goes to Codex where the request says Codex reads
				// it, and into a note of the session where it does not.
				if r := tc.answer.reason; !tc.answer.allow && r != "" && (strings.Contains(tc.want, r) != pr.ReasonRead || strings.Contains(tc.note, r) == pr.ReasonRead) {
					t.Errorf("denied with the reason %q: app-server gets %s and the note is %q, but reasonRead is %v", r, tc.want, tc.note, pr.ReasonRead)
				}
				if _, ok := f.answers(t)[id]; ok {
					t.Fatal("answered before the app answered")
				}
				if err := f.r.Answer(pr.ID, tc.answer.allow, tc.answer.input, tc.answer.forSession, tc.answer.reason); err != nil {
					t.Fatal(err)
				}
				if err := f.r.Answer(pr.ID, true, nil, false, ""); err != ErrNoRequest {
					t.Errorf("a second answer: %v", err)
				}
			}
			if got := f.waitAnswer(t, id); got != tc.want {
				t.Errorf("app-server got %s, want %s", got, tc.want)
			}
			if tc.note != "" {
				f.rec.waitFor(t, "the note", func() bool {
					for _, n := range f.rec.notes {
						if strings.HasPrefix(n, fakeThreadID+"|") && strings.Contains(n, tc.note) {
							return true
						}
					}
					return false
				})
			}
			// The turn goes on and ends: the session is idle, nothing waits.
			f.rec.waitFor(t, "the turn's end", func() bool {
				st := f.rec.last()
				return st.Status == StatusIdle && len(st.Permissions) == 0
			})
			if tc.note == "" {
				f.rec.mu.Lock()
				if len(f.rec.notes) > 0 {
					t.Errorf("notes %q", f.rec.notes)
				}
				f.rec.mu.Unlock()
			}
		})
	}
}

// An interrupt answers what waits with cancel, then interrupts the turn;
// a prompt while a turn runs steers it.
func TestCodexRemoteInterrupt(t *testing.T) {
	f := startFakeCodex(t, fakeScript{Hang: true, Steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
		"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_1", "command": "sleep 100", "startedAtMs": 1})}}})
	f.prompt(t, "go")
	f.rec.waitFor(t, "the request shown", func() bool { return len(f.rec.last().Permissions) == 1 })
	f.prompt(t, "and also this")
	if got := f.sent(t, codex.MethodTurnSteer); len(got) != 1 || !strings.Contains(got[0], `"expectedTurnId":"turn-1"`) || !strings.Contains(got[0], "and also this") {
		t.Errorf("steer %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.r.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.waitAnswer(t, "101"); got != `{"result":{"decision":"cancel"}}` {
		t.Errorf("the waiting request got %s", got)
	}
	if got := f.sent(t, codex.MethodTurnInterrupt); len(got) != 1 || !strings.Contains(got[0], `"turnId":"turn-1"`) {
		t.Errorf("interrupt %q", got)
	}
	f.rec.waitFor(t, "idle", func() bool { return f.rec.last().Status == StatusIdle })
	// An interrupt with no turn is refused as Claude's is, in words that
	// name Codex (the app shows the refusal as it is).
	if err := f.r.Interrupt(ctx); !errors.Is(err, ErrIdle) || err.Error() != "Codex is not working on anything" {
		t.Errorf("an interrupt with no turn: %v", err)
	}
	// The next prompt is a new turn.
	f.prompt(t, "again")
	if got := f.sent(t, codex.MethodTurnStart); len(got) != 2 {
		t.Errorf("turn/start %d times, want 2", len(got))
	}
}

// Stop answers what waits before app-server goes.
func TestCodexRemoteStopAnswers(t *testing.T) {
	f := startFakeCodex(t, fakeScript{Hang: true, Steps: []fakeStep{{Request: codex.RequestFileChangeApproval, Params: params(map[string]any{
		"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_2", "startedAtMs": 1})}}})
	f.prompt(t, "go")
	f.rec.waitFor(t, "the request shown", func() bool { return len(f.rec.last().Permissions) == 1 })
	f.r.Stop()
	if got := f.answers(t)["101"]; !strings.Contains(got, `"decision":"cancel"`) {
		t.Errorf("at Stop the request got %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.r.Prompt(ctx, "x"); err != ErrCodexStopped {
		t.Errorf("a prompt after Stop: %v", err)
	}
}

// app-server dying in the middle of a turn leaves the session idle with
// the error shown, its request gone; the next prompt starts app-server
// again and resumes the thread.
func TestCodexRemoteServerDies(t *testing.T) {
	f := startFakeCodex(t, fakeScript{Steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
		"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_1", "command": "ls", "startedAtMs": 1})}, {Exit: true}}})
	f.prompt(t, "go")
	f.rec.waitFor(t, "the request shown", func() bool { return len(f.rec.last().Permissions) == 1 })
	if err := f.r.Answer("call_1", true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	f.rec.waitFor(t, "the error", func() bool {
		st := f.rec.last()
		return st.Status == StatusIdle && strings.Contains(st.Error, "Codex app-server stopped")
	})
	f.prompt(t, "again")
	if got := f.sent(t, codex.MethodThreadResume); len(got) != 1 || !strings.Contains(got[0], fakeThreadID) {
		t.Errorf("thread/resume %q", got)
	}
	if got := f.sent(t, codex.MethodTurnStart); len(got) != 2 {
		t.Errorf("turn/start %d times, want 2", len(got))
	}
	// The new app-server plays the script again, without the crash.
	f.rec.waitFor(t, "the request shown again", func() bool { return len(f.rec.last().Permissions) == 1 })
	if err := f.r.Answer("call_1", true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	f.rec.waitFor(t, "the turn's end", func() bool {
		st := f.rec.last()
		return st.Status == StatusIdle && st.Error == ""
	})
}
