package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/protocol"
)

// switchRuns: the switch test runs this many times (the window it checks
// is one of timing).
const switchRuns = 50

// An app prompt arrives while the terminal's Claude has records the
// scanner holds back (in the order window, right after an Agent call that
// starts no subagent): the switch delivers them before it closes the turn,
// and the relay's copy (the outbox) ends equal to the replay of the
// transcript, every run.
func TestSwitchDeliversHeldRecords(t *testing.T) {
	for i := range switchRuns {
		if !t.Run(fmt.Sprint(i), switchOnce) {
			break
		}
	}
}

func switchOnce(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	stream := filepath.Join(t.TempDir(), "stream.json")
	const sess = "77777777-2222-4333-8444-555555555555"
	// Each record 5 ms after the one before, from now: recent, and the
	// record after the Agent call later than it (the scanner holds such a
	// record for the subagent the call may start).
	base, n := time.Now(), 0
	line := func(v map[string]any) string {
		v["sessionId"] = "{{session}}"
		n++
		v["timestamp"] = base.Add(time.Duration(n) * 5 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		b, _ := json.Marshal(v)
		return string(b)
	}
	assistant := func(uuid string, content ...any) string {
		return line(map[string]any{"type": "assistant", "uuid": uuid, "message": map[string]any{"id": "msg-" + uuid, "role": "assistant", "content": content}})
	}
	text := func(s string) any { return map[string]any{"type": "text", "text": s} }
	writeJSON(t, local, map[string]any{"lines": []string{
		line(map[string]any{"type": "user", "uuid": "lu-{{source}}", "message": map[string]any{"role": "user", "content": "typed in the terminal"}}),
		assistant("la1-{{source}}", text("looking")),
		assistant("la2-{{source}}", map[string]any{"type": "tool_use", "id": "toolu_agent_{{source}}", "name": "Agent",
			"input": map[string]any{"description": "helper", "prompt": "help out"}}),
		assistant("la3-{{source}}", text("after the agent call")),
	}, "intervalMs": 1, "hang": true})
	writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "remote answer"})}})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local, "FAKE_CLAUDE_STREAM=" + stream}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	out := &MemOutbox{}
	sr := startScan(t, home, project, out, log)
	pipe, projectDir := sr.pipe, sr.projectDir

	cmds := make(chan Command)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: pipe, Scanner: sr.sc, Commands: cmds, Events: ev, Logger: log,
	})
	// The prompt goes as soon as the last local record is on disk: the
	// scanner still holds it (and the Agent call's neighbours).
	transcript := filepath.Join(projectDir, sess+".jsonl")
	waitFor(t, "the local records on disk", func() bool {
		b, _ := os.ReadFile(transcript)
		return strings.Contains(string(b), "after the agent call") && ev.last().Mode == "local"
	})
	replies := sendPrompt(cmds, protocol.New(), "from the app")
	if err := <-replies; err != nil {
		t.Fatalf("prompt rejected: %v", err)
	}
	rig := &remoteRig{t: t, out: out, ev: ev}
	// The terminal's turn ends failed (Claude was stopped with the Agent
	// call running), the remote one completed.
	rig.until("the remote turn's end", has("TE(", 2))
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	if err := sr.stop(); err != nil {
		t.Fatal(err)
	}
	if err := pipe.Close(context.Background(), protocol.StatusCompleted, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	live := out.Envelopes()
	envtest.CheckInvariants(t, live)
	want := replayFiles(t, transcript)
	got, exp := describeAll(live), describeAll(want)
	// Replay closes the last turn itself; the live copy was closed by
	// pipe.Close: compare ids of everything replay holds.
	if len(live) < len(want) {
		t.Fatalf("live has %d envelopes, replay %d\nlive %q\nreplay %q", len(live), len(want), got, exp)
	}
	for i := range want {
		if want[i].ID != live[i].ID {
			t.Fatalf("envelope %d: live %s, replay %s\nlive %q\nreplay %q", i, got[i], exp[i], got, exp)
		}
	}
	if !strings.Contains(strings.Join(got, " "), "A(after the agent call)") {
		t.Fatalf("the held record is missing: %q", got)
	}
}
