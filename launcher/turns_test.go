package launcher

import (
	"context"
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
