package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// events records what a Remote tells the app.
type events struct {
	mu     sync.Mutex
	states []SessionState
	lives  []json.RawMessage
}

func (e *events) State(_ string, st SessionState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.states = append(e.states, st)
}

func (e *events) Live(_ string, p json.RawMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lives = append(e.lives, p)
}

func (e *events) last() SessionState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.states) == 0 {
		return SessionState{}
	}
	return e.states[len(e.states)-1]
}

func (e *events) liveText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var sb strings.Builder
	for _, l := range e.lives {
		var d liveDelta
		_ = json.Unmarshal(l, &d)
		sb.WriteString(d.Text)
	}
	return sb.String()
}

type remoteRig struct {
	t       *testing.T
	r       *Remote
	out     *MemOutbox
	ev      *events
	pidfile string
	arglog  string // each start's argv, a JSON array a line
	envdump string // the last start's environment
	home    string
	project string
}

const rigSession = "11111111-2222-4333-8444-555555555555"

// newRemoteRig drives the fake claude in stream-json mode with script.
func newRemoteRig(t *testing.T, script map[string]any, opts RemoteOptions) *remoteRig {
	t.Helper()
	rig := &remoteRig{t: t, out: &MemOutbox{}, ev: &events{}, home: t.TempDir(), project: t.TempDir()}
	p := filepath.Join(t.TempDir(), "stream.json")
	b, _ := json.Marshal(script)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rig.pidfile = filepath.Join(t.TempDir(), "pid")
	rig.arglog = filepath.Join(t.TempDir(), "args")
	rig.envdump = filepath.Join(t.TempDir(), "env")
	opts.Claude, opts.Dir = fakeClaude, rig.project
	opts.Env = append([]string{"HOME=" + rig.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + p, "FAKE_CLAUDE_PIDFILE=" + rig.pidfile,
		"FAKE_CLAUDE_ARGLOG=" + rig.arglog, "FAKE_CLAUDE_ENVDUMP=" + rig.envdump}, opts.Env...)
	opts.StopTimeout = time.Second
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	pipe := NewPipeline("", rig.out)
	rig.r = NewRemote(rigSession, opts, pipe, rig.ev)
	t.Cleanup(func() {
		rig.r.Stop(protocol.StatusCancelled)
		rig.noProcess()
	})
	return rig
}

// noProcess checks that the last Claude started is gone.
func (rig *remoteRig) noProcess() {
	b, err := os.ReadFile(rig.pidfile)
	if err != nil {
		return // never started
	}
	pid, _ := strconv.Atoi(string(b))
	if pid > 0 && testutil.ProcessAlive(pid) {
		rig.t.Errorf("claude (pid %d) outlived its session", pid)
	}
}

// seedTranscript writes the session's transcript as an earlier Claude
// left it: one prompt.
func (rig *remoteRig) seedTranscript(prompt string) {
	rig.t.Helper()
	path := claude.TranscriptPath(rig.r.opts.ProjectDir, rig.r.ID())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		rig.t.Fatal(err)
	}
	rec, _ := json.Marshal(map[string]any{"type": "user", "uuid": "0a0a0a0a-0000-4000-8000-000000000001", "sessionId": rig.r.ID(),
		"timestamp": "2026-01-01T00:00:00Z", "message": map[string]any{"role": "user", "content": prompt}})
	if err := os.WriteFile(path, append(rec, '\n'), 0o644); err != nil {
		rig.t.Fatal(err)
	}
}

// argv returns the arguments of each Claude started so far.
func (rig *remoteRig) argv() [][]string {
	rig.t.Helper()
	return readArgLog(rig.t, rig.arglog)
}

func readArgLog(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var args []string
		if err := json.Unmarshal([]byte(l), &args); err != nil {
			t.Fatalf("arg log %q: %v", l, err)
		}
		out = append(out, args)
	}
	return out
}

func (rig *remoteRig) prompt(text string) {
	rig.t.Helper()
	// Generous: a resumed real Claude under -race on a loaded machine
	// has taken more than 10 s to take a prompt.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	if err := rig.r.Prompt(ctx, text); err != nil {
		rig.t.Fatalf("prompt %q: %v (after %v)", text, err, time.Since(begin))
	}
}

// untilLimit bounds the tests' waits for a Claude (real or fake) or the
// processes around it: generous, as a loaded machine under -race delays
// them (the real Claude Code has taken more than 10 s for a turn). A wait
// that is met returns at once.
const untilLimit = 60 * time.Second

// until polls (with a deadline) until cond holds for the described
// envelopes, and returns them.
func (rig *remoteRig) until(what string, cond func(d []string) bool) []string {
	rig.t.Helper()
	deadline := time.Now().Add(untilLimit)
	for {
		d := describeAll(rig.out.Envelopes())
		if cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			rig.t.Fatalf("waiting for %s; envelopes: %v\nstate: %+v", what, d, rig.ev.last())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (rig *remoteRig) untilState(what string, cond func(SessionState) bool) SessionState {
	rig.t.Helper()
	deadline := time.Now().Add(untilLimit)
	for {
		if st := rig.r.State(); cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			rig.t.Fatalf("waiting for state %s; state: %+v\nenvelopes: %v", what, rig.r.State(), describeAll(rig.out.Envelopes()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// describe is a compact description of an envelope for remote tests.
func describe(e protocol.Envelope) string {
	sub := ""
	if e.Subagent != "" {
		sub = "[" + e.Subagent + "]"
	}
	switch e.Ev.T {
	case protocol.KindText:
		if e.Role == protocol.RoleUser {
			return "U(" + e.Ev.Text + ")"
		}
		return "A" + sub + "(" + e.Ev.Text + ")"
	case protocol.KindTurnStart:
		return "TS"
	case protocol.KindTurnEnd:
		return "TE(" + string(e.Ev.Status) + ")"
	case protocol.KindToolCallStart:
		return "TCS(" + e.Ev.Call + " " + e.Ev.Name + ")"
	case protocol.KindToolCallEnd:
		s := "TCE(" + e.Ev.Call
		if e.Ev.Error {
			s += " error"
		}
		if e.Ev.Result != nil {
			s += " " + strconv.Quote(*e.Ev.Result)
		}
		return s + ")"
	case protocol.KindStart:
		return "start" + sub + "(" + e.Ev.Title + ")"
	case protocol.KindStop:
		return "stop" + sub
	case protocol.KindService:
		return "S(" + e.Ev.Text + ")"
	}
	return string(e.Ev.T)
}

func describeAll(envs []protocol.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = describe(e)
	}
	return out
}

func count(d []string, prefix string) int {
	n := 0
	for _, s := range d {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func has(prefix string, n int) func([]string) bool {
	return func(d []string) bool { return count(d, prefix) >= n }
}

// checkTurns checks the protocol invariants: every turn's envelopes are
// contiguous and turn-end is its last.
func (rig *remoteRig) checkTurns() []protocol.Envelope {
	rig.t.Helper()
	envs := rig.out.Envelopes()
	envtest.CheckInvariants(rig.t, envs)
	return envs
}

func steps(s ...map[string]any) map[string]any { return map[string]any{"steps": s} }

func bash(id, cmd string, ask bool) map[string]any {
	return map[string]any{"tool": map[string]any{"id": id, "name": "Bash", "input": map[string]any{"command": cmd}, "ask": ask, "result": "ran"}}
}

func TestRemoteTwoTurnsWithLiveDeltas(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(map[string]any{"stream": "hello there world", "chunkMs": 2}),
		steps(map[string]any{"text": "second answer"}),
	}}, RemoteOptions{})
	rig.prompt("first")
	rig.until("first turn end", has("TE(completed)", 1))
	rig.prompt("second")
	d := rig.until("second turn end", has("TE(completed)", 2))
	envtest.Eq(t, d, "U(first)", "TS", "A(hello there world)", "TE(completed)", "U(second)", "TS", "A(second answer)", "TE(completed)")
	if got := rig.ev.liveText(); got != "hello there world" {
		t.Fatalf("live deltas %q", got)
	}
	st := rig.untilState("idle with usage", func(s SessionState) bool { return s.Status == StatusIdle && len(s.Usage) > 0 })
	if st.Mode != "remote" || st.Model != "fake-model" || st.CostUSD == 0 {
		t.Fatalf("state %+v", st)
	}
	rig.checkTurns()
}

func TestRemotePermissions(t *testing.T) {
	cases := []struct {
		name   string
		answer func(r *Remote, id string) error
		want   string // prefix of the tool-call-end
	}{
		{"allow", func(r *Remote, id string) error { return r.Answer(id, true, nil, false, "") },
			`TCE(toolu_1 "ran input={\"command\":\"touch made.txt\"}")`},
		{"allow with edited input", func(r *Remote, id string) error {
			return r.Answer(id, true, json.RawMessage(`{"command":"touch other.txt"}`), false, "")
		}, `TCE(toolu_1 "ran input={\"command\":\"touch other.txt\"}")`},
		{"allow for the session", func(r *Remote, id string) error { return r.Answer(id, true, nil, true, "") },
			`TCE(toolu_1 "ran (allowed for the session) input=`},
		{"deny", func(r *Remote, id string) error { return r.Answer(id, false, nil, false, "not in this folder") },
			`TCE(toolu_1 error "not in this folder")`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rig := newRemoteRig(t, map[string]any{"turns": []any{steps(
				map[string]any{"text": "Making."}, bash("toolu_1", "touch made.txt", true), map[string]any{"text": "Done."})}}, RemoteOptions{})
			rig.prompt("make a file")
			st := rig.untilState("a permission request", func(s SessionState) bool { return len(s.Permissions) == 1 })
			p := st.Permissions[0]
			if st.Status != StatusPermission || p.Tool != "Bash" || p.Call != "toolu_1" || p.Subagent != "" || !strings.Contains(string(p.Input), "touch made.txt") ||
				fmt.Sprint(p.ForSession) != "[Bash]" {
				t.Fatalf("state %+v", st)
			}
			// The tool call is out before the request that refers to it.
			rig.until("tool call start", has("TCS(toolu_1", 1))
			if err := c.answer(rig.r, p.ID); err != nil {
				t.Fatal(err)
			}
			d := rig.until("turn end", has("TE(completed)", 1))
			if count(d, c.want) != 1 {
				t.Fatalf("want %s in %v", c.want, d)
			}
			if err := rig.r.Answer(p.ID, true, nil, false, ""); err != ErrNoRequest {
				t.Fatalf("answering twice: %v", err)
			}
			rig.untilState("idle", func(s SessionState) bool { return s.Status == StatusIdle && len(s.Permissions) == 0 })
			rig.checkTurns()
		})
	}
}

func TestRemoteTwoPendingRequests(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(map[string]any{"askPair": []any{
		map[string]any{"id": "toolu_a", "name": "Bash", "input": map[string]any{"command": "touch a"}, "result": "ran"},
		map[string]any{"id": "toolu_b", "name": "Write", "input": map[string]any{"file_path": "b"}, "result": "wrote",
			"parent": "toolu_agent", "agentId": "a1"},
	}})}}, RemoteOptions{})
	rig.prompt("two things")
	st := rig.untilState("two requests", func(s SessionState) bool { return len(s.Permissions) == 2 })
	a, b := st.Permissions[0], st.Permissions[1]
	if a.Call != "toolu_a" || b.Call != "toolu_b" || a.Subagent != "" || b.Subagent != protocol.SubagentID("toolu_agent") {
		t.Fatalf("requests %+v", st.Permissions)
	}
	// Answer the second first.
	if err := rig.r.Answer(b.ID, false, nil, false, "no writes"); err != nil {
		t.Fatal(err)
	}
	if st := rig.untilState("one left", func(s SessionState) bool { return len(s.Permissions) == 1 }); st.Permissions[0].ID != a.ID || st.Status != StatusPermission {
		t.Fatalf("state %+v", st)
	}
	if err := rig.r.Answer(a.ID, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	d := rig.until("turn end", has("TE(completed)", 1))
	if count(d, `TCE(toolu_a "ran`) != 1 || count(d, `TCE(toolu_b error "no writes")`) != 1 {
		t.Fatalf("results %v", d)
	}
}

func TestRemoteInterrupt(t *testing.T) {
	cases := []struct {
		name  string
		turn  map[string]any
		ready func(rig *remoteRig) // wait until the moment to interrupt
		want  []string
	}{
		{"during streaming text", steps(map[string]any{"stream": "one two three four five six seven eight nine ten", "chunkMs": 100}),
			func(rig *remoteRig) {
				rig.t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for rig.ev.liveText() == "" && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			},
			[]string{"U(go)", "TS", "A(one ", "S(Interrupted by user)", "TE(cancelled)"}},
		{"during a tool call", steps(map[string]any{"tool": map[string]any{"id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "sleep 30"}, "runMs": 30000}}),
			func(rig *remoteRig) { rig.until("tool call start", has("TCS(toolu_1", 1)) },
			[]string{"U(go)", "TS", "TCS(toolu_1", "TCE(toolu_1 error", "S(Interrupted by user)", "TE(cancelled)"}},
		{"while a permission request waits", steps(bash("toolu_1", "rm -rf build", true)),
			func(rig *remoteRig) {
				rig.untilState("request", func(s SessionState) bool { return len(s.Permissions) == 1 })
			},
			[]string{"U(go)", "TS", "TCS(toolu_1", "TCE(toolu_1 error", "S(Interrupted by user)", "TE(cancelled)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rig := newRemoteRig(t, map[string]any{"turns": []any{c.turn, steps(map[string]any{"text": "after"})}}, RemoteOptions{})
			rig.prompt("go")
			c.ready(rig)
			if err := rig.r.Interrupt(context.Background()); err != nil {
				t.Fatal(err)
			}
			d := rig.until("cancelled turn", has("TE(cancelled)", 1))
			if len(d) != len(c.want) {
				t.Fatalf("got %v, want %v", d, c.want)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(d[i], w) {
					t.Fatalf("envelope %d: got %v, want prefix %s", i, d, w)
				}
			}
			if st := rig.untilState("idle", func(s SessionState) bool { return s.Status == StatusIdle }); len(st.Permissions) != 0 {
				t.Fatalf("a request survived the interrupt: %+v", st)
			}
			// The session goes on.
			rig.prompt("again")
			rig.until("next turn", has("A(after)", 1))
			rig.checkTurns()
			if err := rig.r.Interrupt(context.Background()); err != nil && err != ErrIdle {
				t.Fatal(err)
			}
		})
	}
}

// A background task that finishes between turns is forwarded at once, with
// no prompt to wake it (seed 004).
func TestRemoteBackgroundTaskBetweenTurns(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{map[string]any{
		"steps": []any{
			map[string]any{"agent": map[string]any{"id": "toolu_A", "agentId": "a1", "prompt": "count the files", "description": "Count files"}},
			map[string]any{"text": "Launched."},
		},
		"after": []any{
			map[string]any{"sleepMs": 50},
			map[string]any{"sub": map[string]any{"parent": "toolu_A", "agentId": "a1", "text": "Two files."}},
			map[string]any{"notify": map[string]any{"parent": "toolu_A", "agentId": "a1", "summary": "Two files."}},
			map[string]any{"text": "The helper is done."},
		},
	}}}, RemoteOptions{})
	rig.prompt("spawn a helper")
	rig.until("the follow-up turn", has("A(The helper is done.)", 1))
	rig.until("its end", has("TE(completed)", 2))
	rig.checkTurns()
	sub := protocol.SubagentID("toolu_A")
	want := []string{"U(spawn a helper)", "TS", "start[" + sub + "](Count files)", "A[" + sub + "](count the files)",
		"A(Launched.)", "TE(completed)", "TS", "A[" + sub + "](Two files.)", "stop[" + sub + "]", "S(Agent “Count files” completed)", "A(The helper is done.)", "TE(completed)"}
	envtest.Eq(t, describeAll(rig.out.Envelopes()), want...)
}

// Claude's stdout ending mid-turn ends the turn failed with a note saying
// why; the next prompt starts a fresh process on the same session.
func TestRemoteReaderDiesMidTurn(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(map[string]any{"text": "partial"}, map[string]any{"exit": 3}),
		steps(map[string]any{"text": "back"}),
	}}, RemoteOptions{})
	rig.prompt("go")
	d := rig.until("failed turn", has("TE(failed)", 1))
	envtest.Eq(t, d, "U(go)", "TS", "A(partial)", "S(Claude Code stopped unexpectedly: exit status 3)", "TE(failed)")
	st := rig.untilState("error", func(s SessionState) bool { return s.Error != "" && s.Status == StatusIdle })
	if !strings.Contains(st.Error, "exit status 3") {
		t.Fatalf("state %+v", st)
	}
	rig.prompt("again") // a fresh process, resuming the session
	d = rig.until("next turn", has("TE(completed)", 1))
	envtest.Eq(t, d, "U(go)", "TS", "A(partial)", "S(Claude Code stopped unexpectedly: exit status 3)", "TE(failed)",
		"U(again)", "TS", "A(back)", "TE(completed)")
	if st := rig.r.State(); st.Error != "" {
		t.Fatalf("error kept after a good prompt: %+v", st)
	}
	rig.checkTurns()
}

func TestRemoteStartupFailure(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"startupExit": 2, "stderr": "boom: bad settings file"}, RemoteOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := rig.r.Prompt(ctx, "hello")
	if err == nil || !strings.Contains(err.Error(), "boom: bad settings file") {
		t.Fatalf("prompt error %v", err)
	}
	st := rig.untilState("error on the session", func(s SessionState) bool { return strings.Contains(s.Error, "boom") })
	if st.Status != StatusIdle {
		t.Fatalf("state %+v", st)
	}
	// Nothing half-born: no open turn is left behind.
	rig.checkTurns()

	// A missing binary is reported the same way.
	r := NewRemote(rigSession, RemoteOptions{Claude: "/nonexistent/claude", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, NewPipeline("", &MemOutbox{}), &events{})
	if err := r.Prompt(ctx, "x"); err == nil || !strings.Contains(err.Error(), "claude not found") {
		t.Fatalf("missing binary: %v", err)
	}
	if !strings.Contains(r.State().Error, "claude not found") {
		t.Fatalf("state %+v", r.State())
	}
}

func TestRemoteModelAndPermissionMode(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(map[string]any{"text": "ok"})}}, RemoteOptions{})
	ctx := context.Background()
	// Not running yet: applied at start.
	if err := rig.r.SetModel(ctx, "opus-x"); err != nil {
		t.Fatal(err)
	}
	rig.prompt("one")
	rig.until("turn", has("TE(completed)", 1))
	if st := rig.r.State(); st.Model != "opus-x" {
		t.Fatalf("model not passed at start: %+v", st)
	}
	// Running: changed in the live process.
	if err := rig.r.SetPermissionMode(ctx, "acceptEdits"); err != nil {
		t.Fatal(err)
	}
	if err := rig.r.SetModel(ctx, "sonnet-y"); err != nil {
		t.Fatal(err)
	}
	if st := rig.r.State(); st.Model != "sonnet-y" || st.PermissionMode != "acceptEdits" {
		t.Fatalf("state %+v", st)
	}
}

// Stop ends the process and closes the open turn; nothing of it comes
// after its turn-end.
func TestRemoteStopMidTurn(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(
		map[string]any{"tool": map[string]any{"id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "make"}, "runMs": 30000}})}}, RemoteOptions{})
	rig.prompt("build")
	rig.until("tool call", has("TCS(toolu_1", 1))
	rig.r.Stop(protocol.StatusCancelled)
	d := describeAll(rig.checkTurns())
	envtest.Eq(t, d, "U(build)", "TS", "TCS(toolu_1 Bash)", `TCE(toolu_1 error "[Request interrupted by user for tool use]")`, "TE(cancelled)")
	rig.noProcess()
	if err := rig.r.Prompt(context.Background(), "more"); err != ErrClosed {
		t.Fatalf("prompt after stop: %v", err)
	}
}

// Claude's rate_limit_event (stdout only): a change of the rate limit is a
// service envelope in the turn and the session state's rateLimit; an
// "allowed" that changes nothing is not shown; an unknown message is
// passed over. (A conversation_reset: TestRemoteClear.)
func TestRemoteRateLimitAndReset(t *testing.T) {
	raw := func(m map[string]any) map[string]any { return map[string]any{"raw": m} }
	rl := func(status string, util float64) map[string]any {
		return raw(map[string]any{"type": "rate_limit_event", "rate_limit_info": map[string]any{
			"status": status, "rateLimitType": "five_hour", "utilization": util, "resetsAt": 1795478400}})
	}
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(rl("allowed", 0.2), map[string]any{"text": "one"}, rl("allowed_warning", 0.8)),
		steps(rl("allowed_warning", 0.85), map[string]any{"text": "two"}, raw(map[string]any{"type": "future_message", "x": 1})),
	}}, RemoteOptions{})
	rig.prompt("first")
	rig.until("first turn end", has("TE(completed)", 1))
	st := rig.untilState("the rate limit in the state", func(s SessionState) bool { return s.RateLimit != nil })
	if st.RateLimit.Status != "allowed_warning" || st.RateLimit.RateLimitType != "five_hour" {
		t.Fatalf("state's rate limit %+v", st.RateLimit)
	}
	rig.prompt("second")
	d := rig.until("second turn end", has("TE(completed)", 2))
	envtest.Eq(t, d, "U(first)", "TS", "A(one)", "S(Rate limit warning: 80% of the 5-hour usage limit used (resets Nov 24 00:00 UTC))", "TE(completed)",
		"U(second)", "TS", "A(two)", "TE(completed)")
}

// stop-task stops one background subagent: Claude gets stop_task with the
// subagent's task id, and once Claude says the task ended it is no longer
// running (a second stop is refused); an unknown subagent is refused.
func TestRemoteStopTask(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(map[string]any{"agent": map[string]any{"id": "toolu_bg1", "agentId": "a0123456789abcdef", "prompt": "count", "description": "Count files"}},
			map[string]any{"text": "Launched."}),
	}}, RemoteOptions{})
	inlog := filepath.Join(t.TempDir(), "in")
	rig.r.opts.Env = append(rig.r.opts.Env, "FAKE_CLAUDE_INLOG="+inlog)
	rig.prompt("spawn")
	rig.until("the turn", has("TE(completed)", 1))
	sub := protocol.SubagentID("toolu_bg1")
	if err := rig.r.StopTask(context.Background(), "c"+strings.Repeat("0", 23)); !errors.Is(err, ErrNoTask) {
		t.Fatalf("stop of an unknown subagent: %v", err)
	}
	if err := rig.r.StopTask(context.Background(), sub); err != nil {
		t.Fatalf("stop: %v", err)
	}
	b, _ := os.ReadFile(inlog)
	if !strings.Contains(string(b), "stop_task a0123456789abcdef") {
		t.Fatalf("Claude's input: %q", b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := rig.r.StopTask(context.Background(), sub)
		if errors.Is(err, ErrNoTask) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stopped task still runs: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A background subagent stopped while its tool runs: Claude prints the
// task's notification, then the subagent's lines (the tool's result, its
// interruption line). The subagent starts once and stops once, after its
// last line, as the transcript's replay shows it.
func TestRemoteStopTaskOneStartOneStop(t *testing.T) {
	sub := protocol.SubagentID("toolu_bg1")
	const agent = "a0123456789abcdef"
	subLine := func(typ string, content any) map[string]any {
		return map[string]any{"conv": map[string]any{"type": typ, "parent_tool_use_id": "toolu_bg1", "agent_id": agent,
			"message": map[string]any{"role": typ, "content": content}}}
	}
	rig := newRemoteRig(t, map[string]any{
		"turns": []any{steps(map[string]any{"agent": map[string]any{"id": "toolu_bg1", "agentId": agent, "prompt": "count", "description": "Count files"}},
			subLine("assistant", []any{map[string]any{"type": "tool_use", "id": "toolu_s1", "name": "Bash", "input": map[string]any{"command": "sleep 20"}}}),
			map[string]any{"text": "Launched."})},
		"onStop": []any{
			map[string]any{"raw": map[string]any{"type": "system", "subtype": "task_notification", "task_id": agent, "tool_use_id": "toolu_bg1",
				"status": "stopped", "summary": "Count files"}},
			subLine("user", []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_s1", "content": "stopped", "is_error": true}}),
			subLine("user", []any{map[string]any{"type": "text", "text": claude.InterruptedForToolText}}),
			// The turn Claude starts by itself on the notification.
			map[string]any{"raw": map[string]any{"type": "system", "subtype": "init"}},
			map[string]any{"conv": map[string]any{"type": "assistant", "message": map[string]any{"id": "msg_after", "role": "assistant",
				"content": []any{map[string]any{"type": "text", "text": "It stopped."}}}}},
			map[string]any{"raw": map[string]any{"type": "result", "subtype": "success", "terminal_reason": "completed"}},
		},
	}, RemoteOptions{})
	rig.prompt("spawn")
	rig.until("the turn", has("TE(completed)", 1))
	if err := rig.r.StopTask(context.Background(), sub); err != nil {
		t.Fatalf("stop: %v", err)
	}
	rig.until("the follow-up turn", has("TE(completed)", 2))
	d := describeAll(rig.checkTurns())
	envtest.Eq(t, d, "U(spawn)", "TS", "start["+sub+"](Count files)", "A["+sub+"](count)", "TCS(toolu_s1 Bash)", "A(Launched.)", "TE(completed)",
		"TS", `TCE(toolu_s1 error "stopped")`, "A["+sub+"]("+claude.InterruptedForToolText+")", "stop["+sub+"]", "S(Agent “Count files” stopped)",
		"A(It stopped.)", "TE(completed)")
}

// task_progress shows in the state as what the subagent does now; the
// task's end removes it.
func TestRemoteTaskProgress(t *testing.T) {
	raw := func(m map[string]any) map[string]any { return map[string]any{"raw": m} }
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(map[string]any{"agent": map[string]any{"id": "toolu_bg1", "agentId": "a0123456789abcdef", "prompt": "count", "description": "Count files"}},
			raw(map[string]any{"type": "system", "subtype": "task_progress", "task_id": "a0123456789abcdef", "tool_use_id": "toolu_bg1",
				"description": "Count files", "last_tool_name": "Bash", "usage": map[string]any{"total_tokens": 1200, "tool_uses": 3}}),
			map[string]any{"text": "Launched."}),
		steps(map[string]any{"notify": map[string]any{"parent": "toolu_bg1", "agentId": "a0123456789abcdef", "summary": "done"}}, map[string]any{"text": "ok"}),
	}}, RemoteOptions{})
	rig.prompt("spawn")
	st := rig.untilState("the progress", func(s SessionState) bool { return len(s.Tasks) == 1 })
	want := TaskProgress{Subagent: protocol.SubagentID("toolu_bg1"), Description: "Count files", LastTool: "Bash", Tokens: 1200, ToolUses: 3}
	if st.Tasks[0] != want {
		t.Fatalf("progress %+v, want %+v", st.Tasks[0], want)
	}
	rig.until("the first turn", has("TE(completed)", 1))
	rig.prompt("next")
	rig.untilState("the progress gone", func(s SessionState) bool { return len(s.Tasks) == 0 && s.Status == StatusIdle })
}

// Claude reports a running total (total_cost_usd) at each result; the
// state carries what each turn cost, by its turn id.
func TestRemoteTurnCosts(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(map[string]any{"text": "one"}),
		steps(map[string]any{"text": "two"}),
	}}, RemoteOptions{})
	rig.prompt("first")
	rig.until("first turn end", has("TE(completed)", 1))
	rig.prompt("second")
	rig.until("second turn end", has("TE(completed)", 2))
	st := rig.untilState("two turn costs", func(s SessionState) bool { return len(s.TurnCosts) == 2 })
	var turns []string
	for _, e := range rig.checkTurns() {
		if e.Ev.T == protocol.KindTurnEnd {
			turns = append(turns, e.Turn)
		}
	}
	for i, c := range st.TurnCosts {
		if c.Turn != turns[i] || math.Abs(c.USD-0.0012) > 1e-9 {
			t.Errorf("turn cost %d = %+v, want turn %s and 0.0012 (the running totals were 0.0012 and 0.0024)", i, c, turns[i])
		}
	}
	if math.Abs(st.CostUSD-0.0024) > 1e-9 {
		t.Errorf("costUsd %v, want the running total 0.0024", st.CostUSD)
	}
}
