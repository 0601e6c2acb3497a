//go:build unix

package launcher

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// screen collects what a program printed to its terminal.
type screen struct{ testutil.SyncBuffer }

func (s *screen) text() string { return testutil.TerminalText(s.String()) }

// newTerminal opens a pseudo-terminal of 40 rows and cols columns, closed
// when the test ends: Claude gets tty, and scr collects what it prints.
func newTerminal(t *testing.T, cols uint16) (ptmx, tty *os.File, scr *screen) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: cols})
	scr = &screen{}
	go func() { _, _ = io.Copy(scr, ptmx) }()
	return ptmx, tty, scr
}

// The real Claude Code in interactive mode under a pseudo-terminal, started
// by RunLocal: the SessionStart hook reports the session, the scanner follows
// the transcript, and the prompt typed in the terminal and the answer come
// out as envelopes equal to the replay of the finished transcript.
func TestRealClaudeInteractive(t *testing.T) {
	e := claudetest.New(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("hello from the terminal")}})
	out := &MemOutbox{}
	pipe := NewPipeline("", out)
	sessions := runInteractive(t, e, pipe, "say hi", func() bool { return hasAgentText(out.Envelopes(), "hello from the terminal") },
		func() string { return fmt.Sprint(envtest.DescribeAll(out.Envelopes())) })
	got := out.Envelopes()
	envtest.CheckInvariants(t, got)
	want := replayFiles(t, filepath.Join(e.ProjectDir(t), sessions[0]+".jsonl"))
	gd := envtest.DescribeAll(got)
	if len(gd) < len(want) {
		t.Fatalf("live %v\nreplay %v", gd, envtest.DescribeAll(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID {
			t.Fatalf("envelope %d differs: live %v\nreplay %v", i, gd, envtest.DescribeAll(want))
		}
	}
	if !strings.HasPrefix(gd[0], "U(say hi)") || gd[len(gd)-1] != "TE(completed)" {
		t.Fatalf("envelopes: %v", gd)
	}
	t.Logf("interactive: %v", gd)
}

// runInteractive runs the real Claude interactively in a terminal, its
// transcripts followed into pipe, types prompt, waits until answered()
// (what() describes the state for a failure), quits with /exit and closes
// the pipeline; it returns the sessions the SessionStart hook named.
func runInteractive(t *testing.T, e *claudetest.Env, pipe *Pipeline, prompt string, answered func() bool, what func() string) []string {
	t.Helper()
	return runInteractiveArgs(t, e, pipe, nil, prompt, answered, what)
}

// runInteractiveArgs is runInteractive with the user's arguments to Claude
// (what follows `ccrelay` on its command line).
func runInteractiveArgs(t *testing.T, e *claudetest.Env, pipe *Pipeline, args []string, prompt string, answered func() bool, what func() string) []string {
	t.Helper()
	ptmx, tty, scr := newTerminal(t, 120)
	l := followPipeline(t, e.ProjectDir(t), pipe)
	var sessions []string
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hookBin := buildHookForwarder(t)
	done := make(chan int, 1)
	go func() {
		code, err := RunLocal(ctx, LocalOptions{Claude: e.Claude, Args: args, Dir: e.Project, Env: e.Environ(),
			Stdin: tty, Stdout: tty, Stderr: tty, HookCommand: []string{hookBin, "hook"},
			OnSession: func(s SessionStart) {
				mu.Lock()
				sessions = append(sessions, s.SessionID)
				mu.Unlock()
				l.sc.AddSession(s.SessionID)
			}})
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	// Wait for the input box, then type a prompt.
	waitScreen(t, scr, "the prompt", func(s string) bool {
		return strings.Contains(s, "? for shortcuts") || strings.Contains(s, "│ >") || strings.Contains(s, "❯")
	})
	typePrompt(t, ptmx, scr, e, prompt)
	// The terminal draws words with cursor moves, not spaces: look for
	// the answer where it matters, in the outbox (within a minute: a
	// machine busy with the rest of the suite slows Claude Code down).
	deadline := time.Now().Add(time.Minute)
	for !answered() {
		if time.Now().After(deadline) {
			mu.Lock()
			named := slices.Clone(sessions)
			mu.Unlock()
			t.Fatalf("answer never reached the outbox: %s\nsessions the hook named: %q; requests to the model: %d\nscreen:\n%q",
				what(), named, len(e.API.Requests()), tail(scr.text(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Quit Claude as a user would.
	typeLine(t, ptmx, scr, "/exit")
	var code int
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		cancel()
		code = <-done
		t.Fatalf("claude did not exit on /exit; screen:\n%s", tail(scr.text(), 2000))
	}
	if code != 0 {
		t.Fatalf("claude exit %d", code)
	}
	l.stop(t)
	if err := pipe.Close(context.Background(), protocol.StatusCompleted, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sessions) == 0 {
		t.Fatal("no SessionStart hook")
	}
	return slices.Clone(sessions)
}

// typeLine types text into the terminal, waits until the program echoed it
// (typing again if the keys were lost while the input box was not ready),
// then presses Enter.
func typeLine(t *testing.T, ptmx io.Writer, scr *screen, text string) {
	t.Helper()
	squeezed := strings.ReplaceAll(text, " ", "")
	mark := len(scr.text())
	echoed := func() bool {
		// The screen draws spaces as cursor moves; compare without them,
		// in what was drawn since typing started.
		return strings.Contains(strings.ReplaceAll(scr.text()[mark:], " ", ""), squeezed)
	}
	for attempt := 0; !echoed(); attempt++ {
		if attempt == 20 {
			t.Fatalf("%q never echoed; screen:\n%q", text, tail(scr.text(), 2000))
		}
		if attempt > 0 {
			ptmx.Write(bytes.Repeat([]byte{0x7f}, len(text))) // erase a partial echo
		}
		ptmx.Write([]byte(text))
		deadline := time.Now().Add(time.Second)
		for !echoed() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	ptmx.Write([]byte("\r"))
}

// typePrompt types prompt into Claude's input box (typeLine) and makes
// sure Claude took it: it presses Enter again until the model is asked with
// it. On a loaded machine Claude Code can lose the Enter that follows the
// echoed text (seen: the prompt left in its input box, no request), while
// an Enter on an empty input box is nothing to it.
func typePrompt(t *testing.T, ptmx io.Writer, scr *screen, e *claudetest.Env, prompt string) {
	t.Helper()
	typeLine(t, ptmx, scr, prompt)
	e.EnterUntilTaken(t, ptmx, prompt, scr.text)
}

func hasAgentText(envs []protocol.Envelope, s string) bool {
	for _, e := range envs {
		if e.Role == protocol.RoleAgent && e.Ev.T == protocol.KindText && strings.Contains(e.Ev.Text, s) {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// buildHookForwarder returns the fake claude binary, which is also a hook
// forwarder when run as `<bin> hook`.
func buildHookForwarder(*testing.T) string { return fakeClaude }

// terminalScenarios are the scenarios of docs/compatibility.md that need a
// terminal.
func terminalScenarios() []versionScenario {
	return []versionScenario{{name: "fork in local mode (ccrelay --resume ID --fork-session)", run: realClaudeLocalFork, note: forkHookNote}}
}

// forkSessionStartNamesFork is the oldest version known to name the fork in
// its SessionStart hook (source "fork"); 2.1.197 names the parent (source
// "resume").
const forkSessionStartNamesFork = "2.1.330"

func forkHookNote(version string) string {
	if c, ok := claude.CompareVersions(version, forkSessionStartNamesFork); ok && c < 0 {
		return "its SessionStart hook names the parent: ccrelay gives the fork its id with --session-id"
	}
	return ""
}

// ccrelay --resume ID --fork-session in local mode: the fork Claude runs
// in the terminal is followed and relayed under the fork's id (its history
// copied from the parent, then the new turn), equal to replay of the
// fork's transcript; nothing is relayed under the parent. Claude Code
// 2.1.197's SessionStart hook names the parent (forkSessionStart): before
// the fix the terminal's turn never reached the outbox.
func realClaudeLocalFork(t *testing.T, in claudetest.Install) {
	e := claudetest.NewWith(t, in.Path,
		fakeapi.Rule{LastUserContains: "second", Reply: []fakeapi.Block{fakeapi.Text("answer in the fork")}},
		fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("noted")}})
	parent := claude.NewSessionID()
	e.Run(t, nil, "-p", "first", "--session-id", parent)
	out := &lockedOutbox{}
	pipe := NewPipeline("", out)
	sessions := runInteractiveArgs(t, e, pipe, []string{"--resume", parent, "--fork-session"}, "second",
		func() bool { return hasAgentText(out.all(), "answer in the fork") },
		func() string { return fmt.Sprint(envtest.DescribeAll(out.all())) })
	if len(sessions) != 1 || sessions[0] == parent {
		t.Fatalf("sessions followed %v, parent %s: want the fork only", sessions, parent)
	}
	fork := sessions[0]
	if got := out.of(parent); len(got) != 0 {
		t.Fatalf("relayed under the parent: %q", envtest.DescribeAll(got))
	}
	got := out.of(fork)
	want := replayFiles(t, filepath.Join(e.ProjectDir(t), fork+".jsonl"))
	if len(got) < len(want) {
		t.Fatalf("live %q\nreplay %q", envtest.DescribeAll(got), envtest.DescribeAll(want))
	}
	// Live ends with the turn the pipeline closed as Claude quit.
	d := liveEqualsReplay(t, got[:len(want)], want)
	// Not in this order every time: on a busy machine 2.1.197 writes the
	// fork's first answer ahead of the history it copies and of the
	// prompt (the file's order, which live and replay both follow).
	for _, w := range []string{"U(first)", "A(noted)", "U(second)", "A(answer in the fork)"} {
		if !slices.ContainsFunc(d, func(s string) bool { return strings.HasPrefix(s, w) }) {
			t.Fatalf("no %s in %q", w, d)
		}
	}
}
