package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// `ccrelay --remote --resume ID`, what the exit hint suggests with
// --remote, continues the session the app shows: the same session on the
// relay (not a new one), whose next prompt the resumed Claude answers,
// with nothing of it sent twice.
func TestRemoteResumeContinuesSession(t *testing.T) {
	buildFakeClaude(t)
	srv, base, token := startServe(t, t.TempDir())
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	home, project, state := t.TempDir(), t.TempDir(), t.TempDir()
	script := filepath.Join(state, "stream.json")
	os.WriteFile(script, []byte(`{"turns":[{"steps":[{"text":"hello from claude"}]},{"steps":[{"text":"again from claude"}]}]}`), 0o644)
	arglog := filepath.Join(state, "args")
	const session = "33333333-2222-4333-8444-555555555555"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// run starts ccrelay --remote with args and returns it with the
	// session it says it waits in.
	run := func(args ...string) (*exec.Cmd, string) {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"--remote", "--claude", fakeClaude, "--state", state, "--relay", base, "--relay-token", token}, args...)...)
		cmd.Dir = project
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + script, "FAKE_CLAUDE_ARGLOG=" + arglog}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ccrelay: session "); ok {
				id, _, _ := strings.Cut(rest, " ")
				go func() {
					for sc.Scan() {
					}
				}()
				return cmd, id
			}
		}
		t.Fatalf("ccrelay %q never said its session", args)
		return nil, ""
	}
	stop := func(cmd *exec.Cmd) {
		t.Helper()
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("ccrelay --remote after SIGTERM: %v", err)
		}
	}

	first, id := run("--session", session)
	if id != session {
		t.Fatalf("--session %s runs session %s", session, id)
	}
	app := dialWSApp(t, ctx, base, token)
	app.until("the session listed", func() bool { _, ok := app.sessions[session]; return ok })
	app.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	if got := app.command(session, protocol.Command{Kind: protocol.CommandPrompt, Text: "hi"}); got != "" {
		t.Fatalf("first prompt: %s", got)
	}
	app.until("the first answer", func() bool { return app.saw(session, "hello from claude") })
	stop(first)

	second, id := run("--resume", session)
	if id != session {
		t.Fatalf("--remote --resume %s started session %s: a new one, not the app's", session, id)
	}
	if got := app.command(session, protocol.Command{Kind: protocol.CommandPrompt, Text: "again"}); got != "" {
		t.Fatalf("the prompt after --resume: %s", got)
	}
	app.until("the answer after --resume", func() bool { return app.saw(session, "again from claude") })
	stop(second)

	argv := readArgLog(t, arglog)
	if len(argv) != 2 || !strings.Contains(strings.Join(argv[1], " "), "--resume="+session) {
		t.Fatalf("Claude's starts %q: the second does not continue the session", argv)
	}
	// What the relay holds of the session, read from the start: each
	// prompt and answer once.
	fresh := dialWSApp(t, ctx, base, token)
	fresh.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	fresh.until("the session's envelopes", func() bool { return fresh.saw(session, "again from claude") })
	texts := map[string]int{}
	fresh.mu.Lock()
	for _, f := range fresh.frames {
		if f.Type != protocol.FrameBatch || f.Session != session {
			continue
		}
		for _, it := range f.Items {
			var e protocol.Envelope
			if json.Unmarshal(it.Envelope, &e) == nil && e.Ev.T == protocol.KindText {
				texts[string(e.Role)+":"+e.Ev.Text]++
			}
		}
	}
	fresh.mu.Unlock()
	for _, want := range []string{"user:hi", "agent:hello from claude", "user:again", "agent:again from claude"} {
		if texts[want] != 1 {
			t.Fatalf("%s %d times in %v", want, texts[want], texts)
		}
	}
}

// readArgLog reads fakeclaude's argument log: one JSON array per start.
func readArgLog(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var args []string
		if err := json.Unmarshal([]byte(l), &args); err != nil {
			t.Fatalf("arg log %q: %v", l, err)
		}
		out = append(out, args)
	}
	return out
}

// Headless, a session is continued by its id: --continue, --resume without
// one and --fork-session are refused with what to do instead (they started
// a new, empty session before), and so is --resume of a session Claude Code
// does not have in this folder.
func TestRemoteResumeNeedsSessionID(t *testing.T) {
	const id = "33333333-2222-4333-8444-555555555555"
	for _, args := range [][]string{{"--continue"}, {"--resume"}, {"--resume", "old work"}, {"--resume", id, "--fork-session"},
		{"--session", "44444444-2222-4333-8444-555555555555", "--resume", id}, {"--resume", id}} {
		res := run(t, append([]string{"--remote", "--relay", "http://127.0.0.1:1", "--relay-token", "x", "--state", t.TempDir()}, args...)...)
		if res.code == 0 || !(strings.Contains(res.stderr, "--resume <session id>") || strings.Contains(res.stderr, "name two sessions") ||
			strings.Contains(res.stderr, "has no session "+id+" in this folder")) {
			t.Fatalf("%q: exit %d, stderr %q", args, res.code, res.stderr)
		}
	}
}
