package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// ccrelay --remote killed while its Claude waits for the model: Claude had
// taken the prompt (its transcript holds it; it echoes a prompt only when
// the model answers) and died with ccrelay. The relay delivers the prompt
// again to the restarted ccrelay, which finds it in the transcript: done,
// not "ccrelay stopped while carrying this command out", and not run
// again; it is shown once, and the next prompt is answered.
func TestRemoteKilledPromptTakenIsDone(t *testing.T) {
	buildFakeClaude(t)
	srv, base, token := startServe(t, t.TempDir())
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	home, project, state := t.TempDir(), t.TempDir(), t.TempDir()
	script := filepath.Join(state, "stream.json")
	os.WriteFile(script, []byte(`{"turns":[{"lateEcho":true,"steps":[{"sleepMs":60000}]},{"steps":[{"text":"answer"}]}]}`), 0o644)
	inlog := filepath.Join(state, "in")
	const session = "55555555-2222-4333-8444-555555555555"
	start := func() *exec.Cmd {
		cmd := exec.Command(binary, "--remote", "--session", session, "--claude", fakeClaude, "--state", state, "--relay", base, "--relay-token", token)
		cmd.Dir = project
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + script, "FAKE_CLAUDE_INLOG=" + inlog}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli := start()
	app := dialWSApp(t, ctx, base, token)
	app.until("the session listed", func() bool { _, ok := app.sessions[session]; return ok })
	app.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	id := protocol.New()
	app.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: "hello"}})
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), project)
	if err != nil {
		t.Fatal(err)
	}
	transcript := claude.TranscriptPath(projectDir, session)
	app.until("the prompt in Claude's transcript", func() bool {
		b, _ := os.ReadFile(transcript)
		return strings.Contains(string(b), `"text":"hello"`)
	})
	cli.Process.Signal(syscall.SIGKILL)
	cli.Wait()
	app.mu.Lock()
	st, _ := app.finalOf(id)
	app.mu.Unlock()
	if st != "" {
		t.Fatalf("the prompt %s before ccrelay came back", st)
	}
	start()
	var msg string
	app.until("the prompt's outcome", func() bool { st, msg = app.finalOf(id); return st != "" })
	if st != protocol.StatusDone {
		t.Fatalf("the prompt Claude took: %s (%s)", st, msg)
	}
	if got := app.command(session, protocol.Command{Kind: protocol.CommandPrompt, Text: "again"}); got != "" {
		t.Fatalf("the next prompt: %s", got)
	}
	app.until("the answer", func() bool { return app.saw(session, `"text":"answer"`) })
	b, _ := os.ReadFile(inlog)
	if n := strings.Count(string(b), "prompt hello\n"); n != 1 {
		t.Fatalf("Claude got the prompt %d times:\n%s", n, b)
	}
	// The prompt is shown once.
	fresh := dialWSApp(t, ctx, base, token)
	fresh.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	fresh.until("the session's envelopes", func() bool { return fresh.saw(session, `"text":"answer"`) })
	fresh.mu.Lock()
	defer fresh.mu.Unlock()
	n := 0
	for _, f := range fresh.frames {
		if f.Type != protocol.FrameBatch || f.Session != session {
			continue
		}
		for _, it := range f.Items {
			var e protocol.Envelope
			if json.Unmarshal(it.Envelope, &e) == nil && e.Role == protocol.RoleUser && e.Ev.T == protocol.KindText && e.Ev.Text == "hello" {
				n++
			}
		}
	}
	if n != 1 {
		t.Fatalf("the prompt shown %d times", n)
	}
}

// finalOf is command id's final status (done or rejected) and its message,
// "" while it has none. Called with mu held.
func (a *wsApp) finalOf(id string) (status, message string) {
	for _, f := range a.frames {
		if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == id && (f.Status == protocol.StatusDone || f.Status == protocol.StatusRejected) {
			return f.Status, f.Message
		}
	}
	return "", ""
}
