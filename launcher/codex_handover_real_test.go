package launcher

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
	"github.com/ccrelay/ccrelay/protocol"
)

// A Codex thread handed from the terminal to the app and back, as far as
// Codex allows it: a turn run in the terminal (`codex exec`, as the TUI
// cannot be driven here), the next driven from the app (RunCodexRemote
// resuming the thread through app-server's thread/resume), the last in the
// terminal again (`codex exec resume <thread>`). One rollout, appended to
// by each with its ordinals going on, followed by one follower into one
// session: what it sent equals the replay of the rollout, nothing twice.
func TestRealCodexHandOver(t *testing.T) {
	e := codextest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &codexSessionsOutbox{}
	pipe, fol := followCodex(t, out)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var thread string
	terminal := func(args ...string) {
		t.Helper()
		code, err := RunCodexLocal(ctx, CodexLocalOptions{Codex: e.Codex, Args: append([]string{"exec", "--skip-git-repo-check"}, args...),
			Dir: e.Project, Env: e.Environ(), CodexHome: e.CodexHome, Stdin: devnull, Logger: log, ScanEvery: 100 * time.Millisecond,
			OnThread: func(p string, _ *codex.SessionMeta) {
				thread, _ = codex.ThreadID(p)
				fol.Follow(p)
			}})
		if err != nil || code != 0 {
			t.Fatalf("codex exec %v: exit %d, %v", args, code, err)
		}
		if err := fol.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	turnEnds := func() int {
		n := 0
		for _, env := range out.Envelopes() {
			if env.Ev.T == protocol.KindTurnEnd {
				n++
			}
		}
		return n
	}

	terminal("say hi")
	if thread == "" || turnEnds() != 1 {
		t.Fatalf("thread %q, %d turns", thread, turnEnds())
	}

	// The app takes the thread over.
	cmds := make(chan Command)
	rctx, stop := context.WithCancel(ctx)
	loopDone := make(chan error, 1)
	go func() {
		loopDone <- RunCodexRemote(rctx, CodexLoopOptions{
			Remote:   CodexRemoteOptions{Codex: e.Codex, Dir: e.Project, Env: e.Environ(), Thread: thread, StopTimeout: 5 * time.Second},
			Pipeline: pipe, Follower: fol, Commands: cmds, Logger: log})
	}()
	done := make(chan error, 1)
	select {
	case cmds <- Command{Command: protocol.Command{Kind: protocol.CommandPrompt, Text: "say hi from the phone"}, Reply: func(err error) { done <- err }}:
	case err := <-loopDone:
		t.Fatalf("RunCodexRemote: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); turnEnds() < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the app's turn did not end: %d turns", turnEnds())
		}
	}
	stop()
	if err := <-loopDone; err != nil {
		t.Fatal(err)
	}

	// Back in the terminal.
	terminal("resume", thread, "say hi again")
	if turnEnds() != 3 {
		t.Fatalf("%d turns, want 3", turnEnds())
	}
	rollouts := e.Rollouts(t)
	if len(rollouts) != 1 {
		t.Fatalf("rollouts %v, want the thread's alone", rollouts)
	}
	if got := out.sessions(); len(got) != 1 || got[0] != thread {
		t.Errorf("sessions %v, want %s alone", got, thread)
	}
	// Codex's ordinals go on across the three runs.
	f, err := os.Open(rollouts[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for n := int64(0); sc.Scan(); n++ {
		r, err := codex.Parse(sc.Bytes())
		if err != nil || !r.HasOrdinal || r.Ordinal != n {
			t.Fatalf("line %d: ordinal %d (%v)", n, r.Ordinal, err)
		}
	}
	sameEnvelopes(t, out.Envelopes(), replayFiles(t, rollouts[0]))
}
