package launcher

import (
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

// The real Codex 0.169.0's SUBAGENT scenario (spawn_agent, wait_agent,
// the subagent's own thread and rollout) followed live, in local mode
// (`codex exec` run by RunCodexLocal, the threads it reports followed) and
// in remote mode (app-server driven by RunCodexRemote): the subagent's
// thread is part of its parent's session, and what the session sends
// equals the replay of the parent's rollout with its subagent's.
func TestRealCodexLiveSubagent(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	check := func(t *testing.T, e *codextest.Env, out *codexSessionsOutbox, thread string) {
		t.Helper()
		rollouts := e.Rollouts(t)
		if len(rollouts) != 2 {
			t.Fatalf("rollouts %v, want the thread's and its subagent's", rollouts)
		}
		var main string
		for _, p := range rollouts {
			if id, _ := codex.ThreadID(p); id == thread {
				main = p
			}
		}
		if main == "" {
			t.Fatalf("no rollout of thread %s among %v", thread, rollouts)
		}
		want := replayFiles(t, main)
		subs := 0
		for _, env := range want {
			if env.Subagent != "" {
				subs++
			}
		}
		if subs == 0 {
			t.Fatal("replay has no subagent envelope")
		}
		sameEnvelopes(t, out.Envelopes(), want)
		if got := out.sessions(); len(got) != 1 || got[0] != thread {
			t.Errorf("sessions %v, want %s alone", got, thread)
		}
	}

	t.Run("local", func(t *testing.T) {
		e := codextest.New(t)
		out := &codexSessionsOutbox{}
		_, fol := followCodex(t, out)
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer devnull.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var threads []string
		code, err := RunCodexLocal(ctx, CodexLocalOptions{Codex: e.Codex, Args: []string{"exec", "--skip-git-repo-check", "SUBAGENT: ask a helper"},
			Dir: e.Project, Env: e.Environ(), CodexHome: e.CodexHome, Stdin: devnull, Logger: log, ScanEvery: 100 * time.Millisecond,
			OnThread: func(p string, _ *codex.SessionMeta) {
				id, _ := codex.ThreadID(p)
				threads = append(threads, id)
				fol.Follow(p)
			}})
		if err != nil || code != 0 {
			t.Fatalf("exit %d, %v", code, err)
		}
		if len(threads) != 1 {
			t.Fatalf("threads reported %v, want the parent's alone", threads)
		}
		if err := fol.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		check(t, e, out, threads[0])
	})

	t.Run("remote", func(t *testing.T) {
		e := codextest.New(t)
		out := &codexSessionsOutbox{}
		pipe, fol := followCodex(t, out)
		cmds := make(chan Command)
		threads := make(chan string, 1)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		loopDone := make(chan error, 1)
		go func() {
			loopDone <- RunCodexRemote(ctx, CodexLoopOptions{
				Remote:   CodexRemoteOptions{Codex: e.Codex, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second},
				Pipeline: pipe, Follower: fol, Commands: cmds, Logger: log,
				OnThread: func(th string) { threads <- th }})
		}()
		var thread string
		select {
		case thread = <-threads:
		case err := <-loopDone:
			t.Fatalf("RunCodexRemote: %v", err)
		case <-time.After(2 * time.Minute):
			t.Fatal("no thread")
		}
		done := make(chan error, 1)
		cmds <- Command{Command: protocol.Command{Kind: protocol.CommandPrompt, Text: "SUBAGENT: ask a helper"}, Reply: func(err error) { done <- err }}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for ended := false; !ended; {
			for _, env := range out.Envelopes() {
				ended = ended || (env.Ev.T == protocol.KindTurnEnd && env.Subagent == "")
			}
			if time.Now().After(deadline) {
				t.Fatal("the turn did not end")
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		if err := <-loopDone; err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := fol.Flush(fctx); err != nil {
			t.Fatal(err)
		}
		check(t, e, out, thread)
	})
}
