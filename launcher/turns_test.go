package launcher

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/envtest"
)

// longTool is a tool call that runs until interrupted.
func longTool(id string) map[string]any {
	return map[string]any{"tool": map[string]any{"id": id, "name": "Bash", "input": map[string]any{"command": "sleep 60"}, "result": "done", "runMs": 60000}}
}

// checkBusyAndInterrupt checks that the session shows busy, and that
// Interrupt is taken and ends the running turn cancelled.
func checkBusyAndInterrupt(t *testing.T, rig *remoteRig, cancelled int) {
	t.Helper()
	if st := rig.r.State(); st.Status != StatusBusy {
		t.Fatalf("status %q while Claude works", st.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rig.r.Interrupt(ctx); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	rig.until("the turn cancelled", has("TE(cancelled)", cancelled))
	rig.untilState("idle", func(s SessionState) bool { return s.Status == StatusIdle })
}

// A prompt sent while a turn runs waits in Claude; when its turn starts,
// the session is busy and Interrupt stops it.
func TestRemoteQueuedPromptTurnBusy(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(bash("toolu_1", "ls", true)),
		steps(longTool("toolu_2")),
	}}, RemoteOptions{})
	rig.prompt("first")
	st := rig.untilState("the permission request", func(s SessionState) bool { return len(s.Permissions) == 1 })
	wait, err := rig.r.SendPrompt("second") // queued behind the first turn
	if err != nil {
		t.Fatal(err)
	}
	if err := rig.r.Answer(st.Permissions[0].ID, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	if err := wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	rig.until("the queued prompt's turn", has("TCS(toolu_2 Bash)", 1))
	checkBusyAndInterrupt(t, rig, 1)
	envtest.Eq(t, rig.until("", has("TE(cancelled)", 1))[4:], "TE(completed)", "U(second)", "TS", "TCS(toolu_2 Bash)",
		"TCE(toolu_2 error \"The user doesn't want to proceed with this tool use. The tool use was rejected.\")", "S(Interrupted by user)", "TE(cancelled)")
	rig.checkTurns()
}

// A turn Claude starts by itself (after a background task) makes the
// session busy, and Interrupt stops it.
func TestRemoteSelfStartedTurnBusy(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{map[string]any{
		"steps": []any{map[string]any{"text": "Launched."}},
		"after": []any{map[string]any{"text": "The helper is done; checking."}, longTool("toolu_3")},
	}}}, RemoteOptions{})
	rig.prompt("go")
	rig.until("the turn Claude started", has("TCS(toolu_3 Bash)", 1))
	checkBusyAndInterrupt(t, rig, 1)
	rig.checkTurns()
}

// Claude dying in a turn it started by itself ends that turn failed.
func TestRemoteSelfStartedTurnDies(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{map[string]any{
		"steps": []any{map[string]any{"text": "Launched."}},
		"after": []any{map[string]any{"text": "The helper is done."}, map[string]any{"exit": 3}},
	}}}, RemoteOptions{})
	rig.prompt("go")
	d := rig.until("the failed turn", has("TE(failed)", 1))
	envtest.Eq(t, d, "U(go)", "TS", "A(Launched.)", "TE(completed)", "TS", "A(The helper is done.)",
		"S(Claude Code stopped unexpectedly: exit status 3)", "TE(failed)")
	rig.checkTurns()
}

// stateLog records each state told to the app with the envelopes in the
// outbox at that moment.
type stateLog struct {
	mu     sync.Mutex
	out    *MemOutbox
	states []SessionState
	seen   [][]string
}

func (l *stateLog) State(_ string, st SessionState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states = append(l.states, st)
	l.seen = append(l.seen, describeAll(l.out.Envelopes()))
}

func (l *stateLog) Live(string, json.RawMessage) {}

func (l *stateLog) last() SessionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.states) == 0 {
		return SessionState{}
	}
	return l.states[len(l.states)-1]
}

// The state goes out in the same order as the envelopes: a permission
// request after its tool call, the usage before its turn-end; a request
// Claude withdraws leaves the state.
func TestRemoteStateInOrderWithEnvelopes(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		steps(map[string]any{"withdraw": map[string]any{"id": "toolu_w", "name": "Bash", "input": map[string]any{"command": "ls"}}},
			bash("toolu_k", "make", true)),
	}}, RemoteOptions{})
	log := &stateLog{out: rig.out}
	rig.r.events = log
	rig.prompt("go")
	var req string
	waitFor(t, "the second request", func() bool {
		st := log.last()
		for _, p := range st.Permissions {
			if p.Call == "toolu_k" {
				req = p.ID
			}
		}
		return req != ""
	})
	if st := log.last(); len(st.Permissions) != 1 {
		t.Fatalf("the withdrawn request is still shown: %+v", st.Permissions)
	}
	if err := rig.r.Answer(req, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	rig.until("the turn's end", has("TE(completed)", 1))
	log.mu.Lock()
	defer log.mu.Unlock()
	usage := false
	for i, st := range log.states {
		for _, p := range st.Permissions {
			if count(log.seen[i], "TCS("+p.Call+" ") == 0 {
				t.Errorf("request for %s told before its tool call: %v", p.Call, log.seen[i])
			}
		}
		if len(st.Usage) > 0 && !usage {
			usage = true
			if count(log.seen[i], "TE(") != 0 {
				t.Errorf("usage told after the turn-end: %v", log.seen[i])
			}
		}
	}
	if !usage {
		t.Error("no usage told")
	}
}
