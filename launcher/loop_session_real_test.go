//go:build unix

package launcher

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/scanner"
)

// The real Claude Code started in the terminal, its SessionStart hook run,
// and no prompt typed: the app's prompt takes the session over, and the
// headless Claude starts it under its id (Claude wrote no transcript, so
// --resume would be refused with "No conversation found"). The prompt is
// done and answered.
func TestRealClaudeTakeOverBeforeAnyPrompt(t *testing.T) {
	e := claudetest.New(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("hello from the app's turn")}})
	_, tty, scr := newTerminal(t, 120)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	pipe := NewPipeline("", out)
	sc, err := scanner.New(scanner.Config{ProjectDir: e.ProjectDir(t), PollInterval: 50 * time.Millisecond, Logger: log}, pipe)
	if err != nil {
		t.Fatal(err)
	}
	scanCtx, stopScan := context.WithCancel(context.Background())
	scanDone := make(chan error, 1)
	go func() { scanDone <- sc.Run(scanCtx); close(scanDone) }()
	defer func() { stopScan(); <-scanDone }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmds := make(chan Command)
	ev := &events{}
	finished := make(chan struct{})
	defer func() { cancel(); <-finished }() // no Claude outlives the test
	go func() {
		defer close(finished)
		_, _ = RunLoop(ctx, LoopOptions{
			Local: LocalOptions{Claude: e.Claude, Dir: e.Project, Env: e.Environ(), Stdin: tty, Stdout: tty, Stderr: tty,
				HookCommand: []string{buildHookForwarder(t), "hook"}, Logger: log},
			Remote:   RemoteOptions{StopTimeout: 5 * time.Second},
			Pipeline: pipe, Scanner: sc, Commands: cmds, Events: ev, Logger: log,
		})
	}()
	waitScreen(t, scr, "the prompt", func(s string) bool {
		return strings.Contains(s, "? for shortcuts") || strings.Contains(s, "│ >") || strings.Contains(s, "❯")
	})
	waitFor(t, "the SessionStart hook", func() bool { return ev.last().Mode == "local" })
	replies := sendPrompt(cmds, "c1", "from the app")
	select {
	case err := <-replies:
		if err != nil {
			t.Fatalf("the app's prompt: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the app's prompt was never answered; envelopes %q", envtest.DescribeAll(out.Envelopes()))
	}
	deadline := time.Now().Add(60 * time.Second)
	for !hasAgentText(out.Envelopes(), "hello from the app's turn") {
		if time.Now().After(deadline) {
			t.Fatalf("the answer never reached the outbox: %q", envtest.DescribeAll(out.Envelopes()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
