//go:build unix

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

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// The real Claude Code, interactive under a pty, started by RunLoop in a
// working directory reached through a symlink: Claude writes its transcript
// under the resolved path, the scanner watches the symlinked one, and the
// loop passes the hook's transcript_path on (AddSessionPath). The session
// is relayed and equals the replay of what Claude wrote.
func TestRealClaudeSymlinkedWorkingDirectory(t *testing.T) {
	e := claudetest.New(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("hello through the link")}})
	link := filepath.Join(t.TempDir(), "code")
	if err := os.Symlink(e.Project, link); err != nil {
		t.Fatal(err)
	}
	// ccrelay computes the project folder from its working directory as
	// the shell names it (os.Getwd honours $PWD): the symlinked path.
	watched, err := claude.ProjectDir(filepath.Join(e.Home, ".claude"), link)
	if err != nil {
		t.Fatal(err)
	}
	if watched == e.ProjectDir(t) {
		t.Fatalf("the symlinked path maps to Claude's folder %s: the test would not test anything", watched)
	}

	ptmx, tty, scr := newTerminal(t, 120)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	pipe := NewPipeline("", out)
	sc, err := scanner.New(scanner.Config{ProjectDir: watched, PollInterval: 50 * time.Millisecond, Logger: log}, pipe)
	if err != nil {
		t.Fatal(err)
	}
	scanCtx, stopScan := context.WithCancel(context.Background())
	scanDone := make(chan error, 1)
	go func() { scanDone <- sc.Run(scanCtx); close(scanDone) }()
	defer func() { stopScan(); <-scanDone }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sessions []string
	type res struct {
		code int
		err  error
	}
	done, finished := make(chan res, 1), make(chan struct{})
	env := append(e.Environ(), "PWD="+link)
	defer func() { cancel(); <-finished }() // no Claude outlives the test
	go func() {
		defer close(finished)
		code, err := RunLoop(ctx, LoopOptions{
			Local: LocalOptions{Claude: e.Claude, Dir: link, Env: env, Stdin: tty, Stdout: tty, Stderr: tty,
				HookCommand: []string{buildHookForwarder(t), "hook"}, Logger: log},
			Pipeline: pipe, Scanner: sessionsSeen{sc, &sessions}, Logger: log,
		})
		done <- res{code, err}
	}()
	waitScreen(t, scr, "the prompt", func(s string) bool {
		return strings.Contains(s, "? for shortcuts") || strings.Contains(s, "│ >") || strings.Contains(s, "❯")
	})
	typePrompt(t, ptmx, scr, e, "say hi")
	deadline := time.Now().Add(untilLimit)
	for !hasAgentText(out.Envelopes(), "hello through the link") {
		if time.Now().After(deadline) {
			t.Fatalf("answer never reached the outbox: %v", envtest.DescribeAll(out.Envelopes()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	typeLine(t, ptmx, scr, "/exit")
	var r res
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		cancel()
		r = <-done
		t.Fatalf("claude did not exit on /exit; screen:\n%s", tail(scr.text(), 2000))
	}
	if r.err != nil || r.code != 0 {
		t.Fatalf("RunLoop: code %d, %v", r.code, r.err)
	}
	stopScan()
	if err := <-scanDone; err != nil {
		t.Fatal(err)
	}
	if err := pipe.Close(context.Background(), protocol.StatusCompleted, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if len(sessions) == 0 {
		t.Fatal("no SessionStart hook")
	}
	main := filepath.Join(e.ProjectDir(t), sessions[0]+".jsonl")
	if _, err := os.Stat(main); err != nil {
		t.Fatalf("Claude did not write under the resolved path: %v", err)
	}
	got, want := out.Envelopes(), replayFiles(t, main)
	envtest.CheckInvariants(t, got)
	gd, wd := envtest.DescribeAll(got), envtest.DescribeAll(want)
	if len(want) == 0 || len(got) < len(want) {
		t.Fatalf("live %v\nreplay %v", gd, wd)
	}
	for i := range want {
		if got[i].ID != want[i].ID {
			t.Fatalf("envelope %d differs: live %v\nreplay %v", i, gd, wd)
		}
	}
}

// sessionsSeen records the sessions the loop announces to the scanner.
// Its slice is read only after RunLoop returned.
type sessionsSeen struct {
	*scanner.Scanner
	ids *[]string
}

func (s sessionsSeen) AddSessionPath(id, path string) {
	*s.ids = append(*s.ids, id)
	s.Scanner.AddSessionPath(id, path)
}

// waitScreen polls the screen until cond holds, with a deadline.
func waitScreen(t *testing.T, scr *screen, what string, cond func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond(scr.text()) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s; screen:\n%q", what, tail(scr.text(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
