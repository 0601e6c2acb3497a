package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func streamLine(t *testing.T, v map[string]any) *claude.StreamMessage {
	t.Helper()
	b, _ := json.Marshal(v)
	m, err := claude.ParseStream(b)
	if err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	return m
}

// For random interleavings of prompts, text, tool calls (held in the queue),
// tool results, permission requests and answers, subagent messages,
// background notifications, results, interrupts, crashes and timer
// expiries, every turn's envelopes are contiguous and turn-end is its last
// (DECISIONS D7).
func TestRemoteOrderingProperty(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			out := &MemOutbox{}
			clock := &testutil.FakeClock{}
			r := NewRemote("sess", RemoteOptions{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
				NewPipeline("", out), &events{})
			newProc := func() *process {
				p := &process{stdin: nopWriteCloser{io.Discard}, exited: make(chan struct{}), done: make(chan struct{}), stderr: &tailBuffer{max: 64}}
				r.mu.Lock()
				r.proc = p
				r.mu.Unlock()
				return p
			}
			p := newProc()
			n := 0
			next := func() string { n++; return fmt.Sprintf("%d", n) }
			var open []string // tool calls without a result
			var agents []string
			// epochOf maps the main-chain output Claude sent while a turn
			// was open (text by uuid, tool calls by id) to that turn's
			// number: it must all land in one turn.
			epochOf := map[string]int{}
			epoch, inTurn := 0, false
			ts := int64(1_700_000_000_000)
			msg := func(v map[string]any) {
				ts += int64(rng.IntN(50))
				if v["type"] == "user" || v["type"] == "assistant" {
					v["uuid"] = "u" + next()
					if v["type"] == "assistant" && v["parent_tool_use_id"] == nil && inTurn {
						epochOf[v["uuid"].(string)] = epoch
						for _, b := range v["message"].(map[string]any)["content"].([]any) {
							if b := b.(map[string]any); b["type"] == "tool_use" && b["name"] != "Agent" {
								epochOf[b["id"].(string)] = epoch
							}
						}
					}
					v["timestamp"] = time.UnixMilli(ts).UTC().Format(time.RFC3339Nano)
				}
				r.handle(p, streamLine(t, v))
			}
			for range 60 {
				switch op := rng.IntN(15); op {
				case 0:
					epoch, inTurn = epoch+1, true
					r.mu.Lock()
					r.turnOpen = true
					r.mu.Unlock()
					msg(map[string]any{"type": "user", "isReplay": true, "message": map[string]any{"role": "user", "content": "prompt " + next()}})
				case 1, 2:
					id := "m" + next()
					if rng.IntN(2) == 0 {
						// Streamed: held for message_delta's usage (case 14).
						msg(map[string]any{"type": "stream_event", "event": map[string]any{"type": "message_start", "message": map[string]any{"id": id}}})
					}
					msg(map[string]any{"type": "assistant", "message": map[string]any{"id": id, "role": "assistant", "content": []any{map[string]any{"type": "text", "text": "t" + next()}}}})
				case 3:
					id := "toolu_" + next()
					open = append(open, id)
					msg(map[string]any{"type": "assistant", "message": map[string]any{"id": "m" + next(), "role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": "x"}}}}})
				case 4:
					if len(open) > 0 {
						i := rng.IntN(len(open))
						id := open[i]
						open = append(open[:i], open[i+1:]...)
						msg(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}}})
					}
				case 5:
					if len(open) > 0 {
						msg(map[string]any{"type": "control_request", "request_id": "req" + next(), "request": map[string]any{"subtype": "can_use_tool", "tool_name": "Bash", "tool_use_id": open[rng.IntN(len(open))], "input": map[string]any{}}})
					}
				case 6:
					if st := r.State(); len(st.Permissions) > 0 {
						_ = r.Answer(st.Permissions[rng.IntN(len(st.Permissions))].ID, rng.IntN(2) == 0, nil, false, "no")
					}
				case 7:
					id := "toolu_A" + next()
					agents = append(agents, id)
					msg(map[string]any{"type": "assistant", "message": map[string]any{"id": "m" + next(), "role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Agent", "input": map[string]any{"prompt": "p" + id, "description": "d"}}}}})
					msg(map[string]any{"type": "system", "subtype": "task_started", "task_id": "a" + id, "tool_use_id": id, "prompt": "p" + id, "is_backgrounded": true})
					msg(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "Async agent launched"}}}, "tool_use_result": map[string]any{"status": "async_launched", "agentId": "a" + id}})
				case 8:
					if len(agents) > 0 {
						a := agents[rng.IntN(len(agents))]
						msg(map[string]any{"type": "assistant", "parent_tool_use_id": a, "agent_id": "a" + a, "message": map[string]any{"id": "m" + next(), "role": "assistant", "content": []any{map[string]any{"type": "text", "text": "sub"}}}})
					}
				case 9:
					if len(agents) > 0 {
						i := rng.IntN(len(agents))
						a := agents[i]
						agents = append(agents[:i], agents[i+1:]...)
						msg(map[string]any{"type": "system", "subtype": "task_notification", "task_id": "a" + a, "tool_use_id": a, "status": "completed"})
					}
				case 10:
					inTurn = false
					msg(map[string]any{"type": "result", "subtype": "success"})
				case 11:
					inTurn = false
					r.mu.Lock()
					r.interrupted = r.turnOpen
					r.mu.Unlock()
					msg(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "[Request interrupted by user]"}}}})
					msg(map[string]any{"type": "result", "subtype": "error_during_execution", "terminal_reason": "aborted_streaming"})
					open = nil
				case 12:
					clock.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
				case 14:
					msg(map[string]any{"type": "stream_event", "event": map[string]any{"type": "message_delta", "usage": map[string]any{"output_tokens": 9}}})
				case 13:
					if rng.IntN(4) == 0 { // Claude dies; a new process follows
						close(p.exited)
						r.exited(p)
						open, inTurn = nil, false
						p = newProc()
					}
				}
			}
			// The process goes away as Stop would make it, then Stop
			// closes what is open.
			p.stopping.Store(true)
			close(p.exited)
			r.exited(p)
			r.Stop(protocol.StatusCancelled)
			envs := out.Envelopes()
			envtest.CheckInvariants(t, envs)
			turnOf := map[int]string{}
			for _, e := range envs {
				key := e.ClaudeUUID
				if e.Ev.T == protocol.KindToolCallStart {
					key = e.Ev.Call
				}
				ep, ok := epochOf[key]
				if !ok || e.Role != protocol.RoleAgent {
					continue
				}
				if t0, seen := turnOf[ep]; seen && t0 != e.Turn {
					t.Fatalf("output of one turn split over turns %s and %s: %v", t0, e.Turn, describeAll(envs))
				}
				turnOf[ep] = e.Turn
			}
			left := map[string]bool{}
			cur := ""
			for i, e := range envs {
				if e.Turn == "" {
					continue
				}
				if e.Turn != cur {
					if left[e.Turn] {
						t.Fatalf("envelope %d: turn %s resumes after another turn: %v", i, e.Turn, describeAll(envs))
					}
					if cur != "" {
						left[cur] = true
					}
					cur = e.Turn
				}
			}
		})
	}
}

// Remote usage is the message's final usage (message_delta over
// message_start's, service_tier kept), while what Claude printed meanwhile
// (a subagent started by a tool the message called) waits behind the
// message, in order; past MaxDeferredLines the message goes out with the
// usage it has.
func TestRemoteFinalUsage(t *testing.T) {
	start := map[string]any{"type": "stream_event", "event": map[string]any{"type": "message_start", "message": map[string]any{"id": "m1"}}}
	text := map[string]any{"type": "assistant", "uuid": "a1", "message": map[string]any{"id": "m1", "role": "assistant",
		"usage":   map[string]any{"input_tokens": 12, "output_tokens": 1, "service_tier": "standard"},
		"content": []any{map[string]any{"type": "text", "text": "hello"}}}}
	call := map[string]any{"type": "assistant", "uuid": "a2", "message": map[string]any{"id": "m1", "role": "assistant",
		"usage":   map[string]any{"input_tokens": 12, "output_tokens": 1, "service_tier": "standard"},
		"content": []any{map[string]any{"type": "tool_use", "id": "toolu_A", "name": "Agent", "input": map[string]any{"prompt": "sub task", "description": "d"}}}}}
	started := map[string]any{"type": "system", "subtype": "task_started", "task_id": "a0", "tool_use_id": "toolu_A", "prompt": "sub task", "is_backgrounded": false}
	prompt := map[string]any{"type": "user", "uuid": "p1", "parent_tool_use_id": "toolu_A", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "sub task"}}}}
	delta := map[string]any{"type": "stream_event", "event": map[string]any{"type": "message_delta", "usage": map[string]any{"output_tokens": 42}}}
	status := map[string]any{"type": "system", "subtype": "status", "status": "requesting"}
	tests := []struct {
		name  string
		lines []map[string]any
		want  string
	}{
		{"final usage, subagent behind the message", []map[string]any{start, text, call, started, prompt, delta},
			`A(hello)[usage] out=42 tier="standard"; S(d)[sub]; A(sub task)[sub]`},
		{"no message_start: not held", []map[string]any{text, call, started, prompt, delta},
			`A(hello)[usage] out=1 tier="standard"; S(d)[sub]; A(sub task)[sub]`},
		{"too much waiting behind it", append(append([]map[string]any{start, text}, repeat(status, MaxDeferredLines+1)...), delta),
			`A(hello)[usage] out=1 tier="standard"`},
		{"just within the bound", append(append([]map[string]any{start, text}, repeat(status, MaxDeferredLines)...), delta),
			`A(hello)[usage] out=42 tier="standard"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &MemOutbox{}
			r := NewRemote("11111111-2222-4333-8444-555555555555", RemoteOptions{Clock: &testutil.FakeClock{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
				NewPipeline("", out), &events{})
			p := &process{stdin: nopWriteCloser{io.Discard}, exited: make(chan struct{}), done: make(chan struct{}), stderr: &tailBuffer{max: 64}}
			r.proc = p
			for _, l := range tt.lines {
				r.handle(p, streamLine(t, l))
			}
			r.mu.Lock()
			r.q.Flush()
			r.mu.Unlock()
			var got []string
			for _, e := range out.Envelopes() {
				if e.Ev.T == protocol.KindTurnStart {
					continue
				}
				d := strings.ReplaceAll(envtest.Describe(e), "[sub="+e.Subagent+"]", "[sub]")
				if e.Usage != nil {
					d += fmt.Sprintf(" out=%d tier=%q", e.Usage.OutputTokens, e.Usage.ServiceTier)
				}
				got = append(got, d)
			}
			if g := strings.Join(got, "; "); g != tt.want {
				t.Fatalf("got  %s\nwant %s", g, tt.want)
			}
		})
	}
}

func repeat(v map[string]any, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// A result that says subtype success with is_error (an API error) ends the
// turn failed, even when no error message came before it.
func TestRemoteResultAPIErrorFails(t *testing.T) {
	out := &MemOutbox{}
	r := NewRemote("11111111-2222-4333-8444-555555555555", RemoteOptions{Clock: &testutil.FakeClock{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NewPipeline("", out), &events{})
	p := &process{stdin: nopWriteCloser{io.Discard}, exited: make(chan struct{}), done: make(chan struct{}), stderr: &tailBuffer{max: 64}}
	r.proc = p
	r.handle(p, streamLine(t, map[string]any{"type": "user", "uuid": "u1", "isReplay": true, "message": map[string]any{"role": "user", "content": "hi"}}))
	r.handle(p, streamLine(t, map[string]any{"type": "assistant", "uuid": "a1", "message": map[string]any{"id": "m1", "role": "assistant", "content": []any{map[string]any{"type": "text", "text": "working"}}}}))
	r.handle(p, streamLine(t, map[string]any{"type": "result", "subtype": "success", "is_error": true, "api_error_status": 400, "terminal_reason": "api_error"}))
	envs := out.Envelopes()
	if len(envs) == 0 || envs[len(envs)-1].Ev.T != protocol.KindTurnEnd || envs[len(envs)-1].Ev.Status != protocol.StatusFailed {
		t.Fatalf("envelopes %q", envtest.DescribeAll(envs))
	}
}

// A prompt is taken when Claude echoes it (isReplay), in the order written;
// one echo with a text block per prompt takes several (Claude Code joins
// the prompts queued behind a turn); a tool result or a subagent's message
// takes none, whatever its keys; a prompt Claude never echoed before it
// ended is not done (it goes to the next Claude). The session is busy
// until every prompt is taken.
func TestRemotePromptTakenOnItsEcho(t *testing.T) {
	out := &MemOutbox{}
	r := NewRemote("11111111-2222-4333-8444-555555555555", RemoteOptions{Clock: &testutil.FakeClock{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		NewPipeline("", out), &events{})
	p := &process{stdin: nopWriteCloser{io.Discard}, exited: make(chan struct{}), done: make(chan struct{}), stderr: &tailBuffer{max: 64}}
	r.proc = p
	results := make([]chan error, 4)
	for i := range results {
		wait, err := r.SendPrompt(fmt.Sprint("prompt ", i))
		if err != nil {
			t.Fatal(err)
		}
		results[i] = make(chan error, 1)
		go func() { results[i] <- wait(context.Background()) }()
	}
	taken := func(want ...bool) {
		t.Helper()
		for i, w := range want {
			if !w {
				select {
				case err := <-results[i]:
					t.Fatalf("prompt %d answered %v before its echo", i, err)
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			select {
			case err := <-results[i]:
				if err != nil {
					t.Fatalf("prompt %d: %v", i, err)
				}
				results[i] = nil
			case <-time.After(10 * time.Second):
				t.Fatalf("prompt %d not taken after its echo", i)
			}
		}
	}
	echo := func(extra map[string]any, blocks ...any) {
		m := map[string]any{"type": "user", "uuid": fmt.Sprint("u", len(out.Envelopes())), "isReplay": true,
			"message": map[string]any{"role": "user", "content": blocks}}
		maps.Copy(m, extra)
		r.handle(p, streamLine(t, m))
	}
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	echo(nil, text("prompt 0"))
	taken(true, false)
	r.handle(p, streamLine(t, map[string]any{"type": "result", "subtype": "success"}))
	// Claude takes prompts 1 and 2 together.
	echo(nil, text("prompt 1\n"), text("prompt 2"))
	taken(false, true, true, false)
	// Neither a tool result nor a subagent's prompt takes prompt 3.
	echo(nil, map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"})
	echo(map[string]any{"parent_tool_use_id": "toolu_2"}, text("a subagent's task"))
	taken(false, false, false, false)
	if st := r.State(); st.Status != StatusBusy {
		t.Fatalf("status %s with a prompt not taken", st.Status)
	}
	// Claude ends before taking prompt 3: it is not done; it goes to the
	// next Claude, which cannot start here (no Claude Code): rejected
	// with both reasons.
	close(p.exited)
	r.mu.Lock()
	r.proc = nil
	r.mu.Unlock()
	close(p.done)
	select {
	case err := <-results[3]:
		if err == nil || !strings.Contains(err.Error(), "stopped before taking the prompt") || !errors.Is(err, ErrClaudeNotFound) {
			t.Fatalf("a prompt Claude never took, and no Claude to take it again: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a prompt Claude never took was never answered")
	}
}

// A background subagent stopped while the turn that launched it still
// runs: Claude 2.1.330 prints the task's notification, then at times the
// turn's result, and only then the subagent's interruption line (seen 2 in
// 32 runs under load). The line is the subagent's and comes before its
// end, as in the transcript's replay; the turn's result does not send the
// held end before it (the line would then be a subagent's that ended,
// shown as the main agent's).
func TestRemoteStoppedTaskLineAfterResult(t *testing.T) {
	const agent = "a0123456789abcdef"
	sub := protocol.SubagentID("toolu_bg1")
	line := func(v map[string]any) map[string]any { return v }
	before := []map[string]any{
		line(map[string]any{"type": "system", "subtype": "init"}),
		line(map[string]any{"type": "user", "uuid": "u1", "isReplay": true, "message": map[string]any{"role": "user", "content": "spawn"}}),
		line(map[string]any{"type": "assistant", "uuid": "a1", "message": map[string]any{"id": "m1", "role": "assistant", "content": []any{
			map[string]any{"type": "tool_use", "id": "toolu_bg1", "name": "Agent", "input": map[string]any{"description": "Count files", "prompt": "count", "run_in_background": true}}}}}),
		line(map[string]any{"type": "system", "subtype": "task_started", "task_id": agent, "tool_use_id": "toolu_bg1", "description": "Count files",
			"prompt": "count", "is_backgrounded": true, "task_type": "local_agent"}),
		line(map[string]any{"type": "user", "uuid": "u2", "message": map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_bg1", "content": "Async agent launched successfully."}}}}),
		line(map[string]any{"type": "assistant", "uuid": "a2", "message": map[string]any{"id": "m2", "role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "Launched."}}}}),
	}
	notification := line(map[string]any{"type": "system", "subtype": "task_notification", "task_id": agent, "tool_use_id": "toolu_bg1", "status": "stopped", "summary": "Count files"})
	result := line(map[string]any{"type": "result", "subtype": "success", "terminal_reason": "completed"})
	interrupted := line(map[string]any{"type": "user", "uuid": "u3", "parent_tool_use_id": "toolu_bg1", "agent_id": agent,
		"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": claude.InterruptedText}}}})
	followUp := []map[string]any{
		line(map[string]any{"type": "system", "subtype": "init"}),
		line(map[string]any{"type": "assistant", "uuid": "a3", "message": map[string]any{"id": "m3", "role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "It stopped."}}}}),
		result,
	}
	for _, tc := range []struct {
		name string
		stop []map[string]any // what Claude prints after the stop
	}{
		{"result before the stop", []map[string]any{result, notification, interrupted}},
		{"result between the notification and the line", []map[string]any{notification, result, interrupted}},
		{"result after the line", []map[string]any{notification, interrupted, result}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &MemOutbox{}
			r := NewRemote("11111111-2222-4333-8444-555555555555", RemoteOptions{Clock: &testutil.FakeClock{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
				NewPipeline("", out), &events{})
			p := &process{stdin: nopWriteCloser{io.Discard}, exited: make(chan struct{}), done: make(chan struct{}), stderr: &tailBuffer{max: 64}}
			r.proc = p
			for _, l := range before {
				r.handle(p, streamLine(t, l))
			}
			r.mu.Lock()
			if r.tasks[sub] != agent {
				r.mu.Unlock()
				t.Fatalf("the task is not followed: %v", r.tasks)
			}
			r.stopping[r.taskCalls[sub]] = true // as StopTask does
			r.mu.Unlock()
			for _, l := range append(slices.Clone(tc.stop), followUp...) {
				r.handle(p, streamLine(t, l))
			}
			r.mu.Lock()
			r.q.Flush()
			r.mu.Unlock()
			envtest.Eq(t, describeAll(withoutTurnMarkers(out.Envelopes())), "U(spawn)", "start["+sub+"](Count files)", "A["+sub+"](count)", "A(Launched.)",
				"A["+sub+"]("+claude.InterruptedText+")", "stop["+sub+"]", "S(Agent “Count files” stopped)", "A(It stopped.)")
		})
	}
}
