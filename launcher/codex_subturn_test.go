package launcher

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
)

// app-server tells its client of every thread it runs, a subagent's too
// (Codex 0.169.0: the spawned thread's turn/started, its deltas and its
// turn/completed, with the subagent's threadId, inside the parent's
// turn). Only the session's own thread says which turn runs: while a
// subagent runs, and after it ended, the session is busy with its turn,
// an abort interrupts that turn, and a subagent's typing is not sent as
// the session's.
func TestCodexRemoteSubagentTurns(t *testing.T) {
	const sub, subTurn = "01a21e56-0942-7741-90c7-3447d6f9e704", "sub-turn-1"
	started := fakeStep{Notify: codex.NotifyTurnStarted, Params: params(map[string]any{"threadId": sub,
		"turn": map[string]any{"id": subTurn, "status": "inProgress", "items": []any{}}})}
	completed := fakeStep{Notify: codex.NotifyTurnCompleted, Params: params(map[string]any{"threadId": sub,
		"turn": map[string]any{"id": subTurn, "status": "completed", "items": []any{}}})}
	delta := func(thread, text string) fakeStep {
		return fakeStep{Notify: codex.NotifyAgentMessageDelta, Params: params(map[string]any{"threadId": thread, "turnId": "t", "itemId": "m", "delta": text})}
	}
	for _, tc := range []struct {
		name  string
		steps []fakeStep
	}{
		{"while the subagent runs", []fakeStep{started, delta(sub, "from the subagent"), delta(fakeThreadID, "from the session")}},
		{"after the subagent ended", []fakeStep{started, delta(sub, "from the subagent"), completed, delta(fakeThreadID, "from the session")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeCodex(t, fakeScript{Hang: true, Steps: tc.steps})
			f.prompt(t, "go")
			f.rec.waitFor(t, "the session's typing", func() bool {
				return len(f.rec.live) > 0 && strings.Contains(f.rec.live[len(f.rec.live)-1], "from the session")
			})
			f.rec.mu.Lock()
			live := strings.Join(f.rec.live, "\n")
			f.rec.mu.Unlock()
			if strings.Contains(live, "from the subagent") {
				t.Errorf("a subagent's typing sent as the session's: %s", live)
			}
			if st := f.r.State(); st.Status != StatusBusy {
				t.Errorf("the session is %s while its turn runs", st.Status)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := f.r.Interrupt(ctx); err != nil {
				t.Fatalf("abort: %v", err)
			}
			if got := f.sent(t, codex.MethodTurnInterrupt); len(got) != 1 || !strings.Contains(got[0], `"turnId":"turn-1"`) {
				t.Errorf("interrupt %q, want the session's turn turn-1", got)
			}
			f.rec.waitFor(t, "idle", func() bool { return f.rec.last().Status == StatusIdle })
		})
	}
}
