package launcher

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
)

// In local mode the session's model is announced as the transcript's
// assistant records carry it: the latest one, a model change included, and
// never Claude Code's own synthetic messages' "<synthetic>". Without it a
// local-mode session shows tokens but no cost on the app's usage page.
func TestLoopAnnouncesLocalModel(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	const sess = "77777777-2222-4333-8444-555555555555"
	rec := func(kind, uuid, model string) string {
		msg := map[string]any{"role": kind, "content": "typed"}
		if kind == "assistant" {
			msg = map[string]any{"id": "msg-" + uuid, "role": kind, "model": model,
				"content": []any{map[string]any{"type": "text", "text": "answer " + uuid}}}
		}
		b, _ := json.Marshal(map[string]any{"type": kind, "uuid": uuid, "sessionId": "{{session}}",
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "message": msg})
		return string(b)
	}
	writeJSON(t, local, map[string]any{"lines": []string{
		rec("user", "u1", ""),
		rec("assistant", "a1", "claude-sonnet-4-5"),
		rec("user", "u2", ""),
		rec("assistant", "a2", "claude-opus-4-1"),
		rec("assistant", "a3", claude.SyntheticModel),
	}, "intervalMs": 5, "hang": true})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	sr := startScan(t, home, project, out, log)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: sr.pipe, Scanner: sr.sc, Commands: make(chan Command), Events: ev, Logger: log,
	})
	rig := &remoteRig{t: t, out: out, ev: ev}
	rig.until("the synthetic message", has("A(answer a3)", 1))
	waitFor(t, "the latest model announced", func() bool {
		st := ev.last()
		return st.Mode == "local" && st.Model == "claude-opus-4-1"
	})
	ev.mu.Lock()
	for i, st := range ev.states {
		if st.Mode != "local" || (st.Model != "" && st.Model != "claude-sonnet-4-5" && st.Model != "claude-opus-4-1") {
			t.Errorf("state %d: %+v", i, st)
		}
	}
	ev.mu.Unlock()
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
}
