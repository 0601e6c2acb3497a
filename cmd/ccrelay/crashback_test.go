package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// The way back from remote to local, with ccrelay killed at its step: a
// session in the terminal is taken over by a prompt from the app, and the
// app gives it back (a switch to local); ccrelay is killed after remote
// mode ended and before local mode starts. ccrelay runs again (remote) for
// one more prompt. The relay ends with replay of the transcript, the
// envtest invariants hold, each prompt's status is done if the session
// holds it and rejected if not, and the switch's status is done.
func TestCrashPointBackToLocal(t *testing.T) {
	const session = "92929292-2222-4333-8444-555555555555"
	switchID := protocol.DeriveID(session, "switch", "local")
	rl := startCrashRelay(t, "")
	s := newCrashSession(t, rl, session)
	args := []string{"--claude", fakeClaude, "--state", filepath.Join(s.state, "ccrelay"), "--relay", rl.base, "--relay-token", rl.token, "--", "--session-id", session}
	cmd := exec.Command(binary, args...)
	cmd.Dir = s.project
	cmd.Env = []string{"HOME=" + s.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + s.stream, "FAKE_CLAUDE_SCRIPT=" + s.local,
		crashpoint.Env + "=" + crashpoint.BackToLocal}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	screen := &watchWriter{phrase: "\x00", seen: make(chan struct{})}
	copied := make(chan struct{})
	go func() { io.Copy(screen, ptmx); close(copied) }()
	exited := waitChan(cmd)
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		ptmx.Close()
		<-copied
	}()
	s.stderr = &testutil.SyncBuffer{}
	if s.until("the terminal's records", cmd, exited, func() bool { return len(storedLines(t, rl.data, session)) >= 9 }) {
		t.Fatalf("ccrelay ended\n%s", screen.text())
	}
	s.prompt("one")
	if s.until("the app's turn", cmd, exited, func() bool { return s.turnEnds() >= 2 }) {
		t.Fatalf("ccrelay ended\n%s", screen.text())
	}
	var switched string
	for attempt := 0; ; attempt++ {
		if switched, err = sendCommand(s, protocol.Command{ID: switchID, Kind: protocol.CommandSwitch, Mode: "local"}); err == nil || attempt == 100 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("switch: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("ccrelay was not killed at %s (the switch: %s)\n%s", crashpoint.BackToLocal, switched, screen.text())
	}
	if !killed(cmd) {
		t.Fatalf("step %s was never reached: ccrelay ended %v\n%s", crashpoint.BackToLocal, cmd.ProcessState, screen.text())
	}

	// Again, remote, for one more prompt.
	before := s.turnEnds()
	cmd2, stderr := s.start("", "--remote", "--session", session)
	exited2 := waitChan(cmd2)
	s.prompt("two")
	if s.until("the second app turn", cmd2, exited2, func() bool { return s.turnEnds() > before }) {
		t.Fatalf("the second run ended\n%s", stderr)
	}
	if s.stop(cmd2, exited2, stderr) {
		t.Fatal("the second run crashed")
	}
	s.check(true)
	got := storedLines(t, rl.data, session)
	envs := make([]protocol.Envelope, len(got))
	for i, l := range got {
		if err := json.Unmarshal([]byte(l), &envs[i]); err != nil {
			t.Fatal(err)
		}
	}
	envtest.CheckInvariants(t, envs)
	checkPromptStatuses(t, s, envs, "one", "two")
	if st, err := sendCommand(s, protocol.Command{ID: switchID, Kind: protocol.CommandSwitch, Mode: "local"}); err != nil || !strings.HasPrefix(st, protocol.StatusDone) {
		t.Errorf("the switch back: %q %v, want done", st, err)
	}
	t.Logf("%d envelopes; the switch: %s", len(got), switched)
}

// sendCommand sends c from an app and returns the first status the relay
// gives for it ("status message").
func sendCommand(s *crashSession, c protocol.Command) (string, error) {
	s.rl.revive()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	app, _, err := websocket.Dial(ctx, strings.Replace(s.rl.base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.rl.token}}})
	if err != nil {
		return "", err
	}
	defer app.CloseNow()
	app.SetReadLimit(relayMaxFrame)
	b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: s.session, Command: &c})
	if err := app.Write(ctx, websocket.MessageText, b); err != nil {
		return "", err
	}
	for {
		_, data, err := app.Read(ctx)
		if err != nil {
			return "", err
		}
		var f protocol.Frame
		json.Unmarshal(data, &f)
		if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == c.ID {
			return string(f.Status) + " " + f.Message, nil
		}
		if f.Type == protocol.FrameError {
			return "", fmt.Errorf("%s: %s", f.Code, f.Message)
		}
	}
}
