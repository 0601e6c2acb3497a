package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// remoteCLI is ccrelay --remote for one session, with an app connected to
// its relay.
type remoteCLI struct {
	t       *testing.T
	session string
	ctx     context.Context
	app     *websocket.Conn
}

func startRemoteCLI(t *testing.T, extra ...string) *remoteCLI {
	t.Helper()
	buildFakeClaude(t)
	srv, base, token := startServe(t, t.TempDir())
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	home, project, state := t.TempDir(), t.TempDir(), t.TempDir()
	script := filepath.Join(state, "stream.json")
	os.WriteFile(script, []byte(`{"turns":[{"steps":[{"text":"ok"}]}]}`), 0o644)
	const session = "33333333-2222-4333-8444-555555555555"
	// The token from a private file (the flag would show in ps).
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--remote", "--session", session, "--claude", fakeClaude, "--state", state, "--relay", base, "--relay-token-file", tokenFile}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Dir = project
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + script}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	app, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.CloseNow() })
	c := &remoteCLI{t: t, session: session, ctx: ctx, app: app}
	c.send(protocol.Frame{Type: protocol.FrameList})
	for listed := false; !listed; {
		f := c.read()
		for _, s := range f.Sessions {
			listed = listed || (s.ID == session && strings.Contains(string(s.Info), `"mode":"remote"`))
		}
	}
	return c
}

func (c *remoteCLI) send(f protocol.Frame) {
	c.t.Helper()
	f.V = protocol.FrameVersion
	b, _ := json.Marshal(f)
	if err := c.app.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *remoteCLI) read() protocol.Frame {
	c.t.Helper()
	_, b, err := c.app.Read(c.ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	var f protocol.Frame
	json.Unmarshal(b, &f)
	return f
}

// command sends a command and returns its final status and message.
func (c *remoteCLI) command(cmd protocol.Command) (string, string) {
	c.t.Helper()
	cmd.ID = protocol.New()
	c.send(protocol.Frame{Type: protocol.FrameCommand, Session: c.session, Command: &cmd})
	for {
		f := c.read()
		if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == cmd.ID &&
			(f.Status == protocol.StatusDone || f.Status == protocol.StatusRejected) {
			return f.Status, f.Message
		}
	}
}

// The app switches Claude to bypassPermissions only when ccrelay was
// started with --allow-bypass-from-app; a model that would be a flag is
// rejected either way.
func TestRemoteBypassFromAppNeedsOptIn(t *testing.T) {
	for _, allow := range []bool{false, true} {
		name := "no opt-in"
		var extra []string
		if allow {
			name, extra = "--allow-bypass-from-app", []string{"--allow-bypass-from-app"}
		}
		t.Run(name, func(t *testing.T) {
			c := startRemoteCLI(t, extra...)
			status, msg := c.command(protocol.Command{Kind: protocol.CommandPermissionMode, Mode: "bypassPermissions"})
			if allow && status != protocol.StatusDone || !allow && (status != protocol.StatusRejected || !strings.Contains(msg, "--allow-bypass-from-app")) {
				t.Fatalf("bypassPermissions: %s %q", status, msg)
			}
			status, msg = c.command(protocol.Command{Kind: protocol.CommandModel, Model: "--dangerously-skip-permissions"})
			if status != protocol.StatusRejected || !strings.Contains(msg, "not a model name") {
				t.Fatalf("model: %s %q", status, msg)
			}
			if status, msg := c.command(protocol.Command{Kind: protocol.CommandPermissionMode, Mode: "plan"}); status != protocol.StatusDone {
				t.Fatalf("plan: %s %q", status, msg)
			}
		})
	}
}

// --session takes only a session id as Claude Code makes them.
func TestRemoteSessionFlagMustBeUUID(t *testing.T) {
	res := run(t, "--remote", "--relay", "http://127.0.0.1:1", "--relay-token", "x", "--state", t.TempDir(), "--session=--dangerously-skip-permissions")
	if res.code == 0 || !strings.Contains(res.stderr, "is not a session id") {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
}
