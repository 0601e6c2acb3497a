package launcher

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// A run of local mode for Codex killed in the middle of a turn (the real
// Codex 0.169.0's shell rollout cut after the command's call, before its
// output) leaves the turn open in the app; the next run in the slot
// (`ccrelay codex resume`: the follower reads the rollout again from its
// cursor, the lines sent before replayed) ends it failed, its call cut,
// saying ccrelay stopped, once the lines are read again and before
// anything new; the relay keeps that end (an envelope id once), whatever a
// later run sends again. Without the kept turn, the turn stayed open in the
// app until the run's exit, which ended it completed.
func TestCodexTurnEndsAfterACrash(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "codex", "testdata", "0.169.0", "exec_shell.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	cut := 0
	for i, l := range lines {
		if strings.Contains(l, `"function_call_output"`) {
			cut = i
			break
		}
	}
	if cut == 0 {
		t.Fatal("no function_call_output in the fixture")
	}
	thread := "01a21dbb-cb8c-7ac3-9a32-08e3d1bb09b1"
	for _, l := range lines[:1] {
		if i := strings.Index(l, `"id":"`); i > 0 {
			thread = l[i+6 : i+6+36]
		}
	}
	sessions, slot := t.TempDir(), t.TempDir()
	rollout := filepath.Join(sessions, "rollout-2026-11-27T15-59-33-"+thread+".jsonl")
	if err := os.WriteFile(rollout, []byte(strings.Join(lines[:cut], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &MemOutbox{}
	run := func() (*CodexPipeline, func()) {
		pipe := NewCodexPipeline(out, func(thread string) CodexMapper { return mapper.NewCodex(thread) })
		if err := pipe.KeepTurns(filepath.Join(slot, CodexTurnsFile), nil); err != nil {
			t.Fatal(err)
		}
		fol := scanner.NewCodexFollower(scanner.CodexConfig{PollInterval: 100 * time.Millisecond, NoWatch: true,
			CursorFile: filepath.Join(slot, "codex-cursor.json"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipe)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- fol.Run(ctx) }()
		fol.Follow(rollout)
		fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := fol.Flush(fctx); err != nil {
			t.Fatal(err)
		}
		return pipe, func() { stop(); <-done }
	}
	// ends are the turn ends the relay keeps: the first of each id (it
	// keeps an envelope once, by its id).
	ends := func() (turnEnds []protocol.Envelope, n int) {
		seen := map[string]bool{}
		for _, e := range out.Envelopes() {
			if e.Ev.T == protocol.KindTurnEnd && !seen[e.ID] {
				seen[e.ID] = true
				turnEnds = append(turnEnds, e)
			}
		}
		return turnEnds, len(out.Envelopes())
	}

	// The first run is killed: no Close.
	_, kill := run()
	kill()
	if te, n := ends(); len(te) != 0 || n == 0 {
		t.Fatalf("first run: %d envelopes, turn ends %+v", n, te)
	}
	// The next run ends the turn as soon as it read the rollout again.
	pipe, stop := run()
	te, _ := ends()
	if len(te) != 1 || te[0].Ev.Status != protocol.StatusFailed {
		t.Fatalf("after the restart, turn ends %+v; want the open turn ended failed", te)
	}
	var note bool
	for _, e := range out.Envelopes() {
		note = note || strings.Contains(e.Ev.Text, "ccrelay stopped before this turn ended")
	}
	if !note {
		t.Fatal("no note that ccrelay stopped")
	}
	stop()
	if err := pipe.Close(context.Background(), protocol.StatusCompleted); err != nil {
		t.Fatal(err)
	}
	if te, _ := ends(); len(te) != 1 || te[0].Ev.Status != protocol.StatusFailed {
		t.Fatalf("after the exit, turn ends %+v", te)
	}
	// A third run has nothing to end.
	pipe, stop = run()
	stop()
	if err := pipe.Close(context.Background(), protocol.StatusCompleted); err != nil {
		t.Fatal(err)
	}
	if te, _ := ends(); len(te) != 1 || te[0].Ev.Status != protocol.StatusFailed {
		t.Fatalf("after a third run, turn ends %+v", te)
	}
}
