package launcher

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// scanRig is what a loop test over the fake Claude runs beside RunLoop: a
// pipeline appending to the test's outbox, and a scanner of the project's
// transcripts (under the fake home) feeding it.
type scanRig struct {
	pipe       *Pipeline
	sc         *scanner.Scanner
	projectDir string
	// stop stops the scanner and returns what its Run returned; it may be
	// called more than once, and runs when the test ends.
	stop func() error
}

// startScan starts the pipeline and the scanner a loop test needs.
func startScan(t *testing.T, home, project string, out Outbox, log *slog.Logger) *scanRig {
	t.Helper()
	pipe := NewPipeline("", out)
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), project)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, PollInterval: 20 * time.Millisecond, Logger: log}, pipe)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	return &scanRig{pipe: pipe, sc: sc, projectDir: projectDir, stop: stop}
}

// fakeLocal is how a loop test starts the fake Claude in the terminal: in
// project, with env, its hooks run by the fake Claude too.
func fakeLocal(project string, env []string, log *slog.Logger, args ...string) LocalOptions {
	return LocalOptions{Claude: fakeClaude, Args: args, Dir: project, Env: env,
		HookCommand: []string{fakeClaude, "hook"}, StopTimeout: time.Second, Logger: log}
}

// startLoop runs RunLoop with opts until ctx ends; the channel gets what
// it returned.
func startLoop(ctx context.Context, opts LoopOptions) <-chan loopResult {
	done := make(chan loopResult, 1)
	go func() {
		code, err := RunLoop(ctx, opts)
		done <- loopResult{code, err}
	}()
	return done
}

// loopResult is what RunLoop returned.
type loopResult struct {
	code int
	err  error
}

// sendPrompt sends the app's prompt text (command id) to the loop reading
// cmds; the channel gets the loop's reply.
func sendPrompt(cmds chan<- Command, id, text string) <-chan error {
	replies := make(chan error, 1)
	cmds <- Command{Command: protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: text}, Reply: func(err error) { replies <- err }}
	return replies
}
