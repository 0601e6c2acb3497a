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

// ccrelay --remote: a session started from the app. It is listed at once
// (before any Claude runs); a prompt from the app starts Claude, whose
// answer is stored; SIGTERM ends ccrelay and its Claude.
func TestRemoteHeadlessFromApp(t *testing.T) {
	buildFakeClaude(t)
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	home, project, state := t.TempDir(), t.TempDir(), t.TempDir()
	script := filepath.Join(state, "stream.json")
	os.WriteFile(script, []byte(`{"turns":[{"steps":[{"stream":"hello from claude","chunkMs":1}]}]}`), 0o644)
	pidfile := filepath.Join(state, "claude.pid")
	const session = "22222222-2222-4333-8444-555555555555"
	cmd := exec.Command(binary, "--remote", "--session", session, "--claude", fakeClaude, "--state", state, "--relay", base, "--relay-token", token)
	cmd.Dir = project
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + script, "FAKE_CLAUDE_PIDFILE=" + pidfile}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.CloseNow()
	send := func(f protocol.Frame) {
		f.V = protocol.FrameVersion
		b, _ := json.Marshal(f)
		if err := app.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() protocol.Frame {
		_, b, err := app.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f protocol.Frame
		json.Unmarshal(b, &f)
		return f
	}
	send(protocol.Frame{Type: protocol.FrameList})
	// The session shows up (remote, idle) before any prompt.
	for listed := false; !listed; {
		f := read()
		for _, s := range f.Sessions {
			listed = listed || (s.ID == session && strings.Contains(string(s.Info), `"mode":"remote"`))
		}
	}
	send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: "c1", Kind: protocol.CommandPrompt, Text: "hi"}})
	var done, live, answer, ended bool
	for !(done && answer && ended) {
		f := read()
		switch f.Type {
		case protocol.FrameStatus:
			if f.Status == protocol.StatusRejected {
				t.Fatalf("prompt rejected: %s", f.Message)
			}
			done = done || f.Status == protocol.StatusDone
		case protocol.FrameLive:
			live = true
		case protocol.FrameBatch:
			for _, it := range f.Items {
				answer = answer || strings.Contains(string(it.Envelope), `"text":"hello from claude"`)
				ended = ended || strings.Contains(string(it.Envelope), `"turn-end"`)
			}
		}
	}
	if !live {
		t.Log("no live frame seen (deltas are best effort)")
	}
	pid := readPID(t, pidfile)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ccrelay --remote after SIGTERM: %v", err)
	}
	waitGone(t, pid)
}
