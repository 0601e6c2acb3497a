package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
	"github.com/ccrelay/ccrelay/internal/fakeresponses"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// ccrelay codex --remote with the real Codex 0.169.0 offline: the thread
// is listed as a remote Codex session before any prompt; a prompt from the
// app is done, Codex's answer and the turn's end are stored; SIGTERM ends
// ccrelay, and app-server with it.
func TestRealCodexRemoteCommand(t *testing.T) {
	e := codextest.New(t)
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	state := t.TempDir()
	cmd := exec.Command(binary, "codex", "--remote", "--codex", e.Codex, "--state", state, "--relay", base, "--relay-token", token)
	cmd.Dir, cmd.Env = e.Project, e.Environ()
	var stderr testutil.SyncBuffer // read while ccrelay runs, when the test fails
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
			t.Fatalf("%v; ccrelay's stderr: %s", err, stderr.String())
		}
		var f protocol.Frame
		json.Unmarshal(b, &f)
		return f
	}
	// The thread shows up as a remote Codex session before any prompt.
	session := ""
	for deadline := time.Now().Add(time.Minute); session == ""; {
		send(protocol.Frame{Type: protocol.FrameList})
		f := read()
		for f.Type != protocol.FrameSessions {
			f = read()
		}
		for _, s := range f.Sessions {
			if strings.Contains(string(s.Info), `"agent":"codex"`) && strings.Contains(string(s.Info), `"mode":"remote"`) {
				session = s.ID
			}
		}
		if session == "" {
			if time.Now().After(deadline) {
				t.Fatalf("no Codex session listed; stderr: %s", stderr.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: "c1", Kind: protocol.CommandPrompt, Text: "TEXT say hello"}})
	var done, answer, ended bool
	for !(done && answer && ended) {
		f := read()
		switch f.Type {
		case protocol.FrameStatus:
			if f.Status == protocol.StatusRejected {
				t.Fatalf("prompt rejected: %s", f.Message)
			}
			done = done || f.Status == protocol.StatusDone
		case protocol.FrameBatch:
			for _, it := range f.Items {
				answer = answer || strings.Contains(string(it.Envelope), fakeresponses.TextReply)
				ended = ended || strings.Contains(string(it.Envelope), `"turn-end"`)
			}
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("ccrelay codex --remote after SIGTERM: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("ccrelay codex --remote did not end after SIGTERM; stderr: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "Codex thread "+session) {
		t.Errorf("stderr does not name the thread: %s", stderr.String())
	}
}

func TestCodexRemoteModel(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		model string
		bad   bool
	}{
		{nil, "", false},
		{[]string{"--model", "gpt-5.5"}, "gpt-5.5", false},
		{[]string{"-m", "gpt-5.5"}, "gpt-5.5", false},
		{[]string{"--model=o3"}, "o3", false},
		{[]string{"--model", "-x"}, "", true},
		{[]string{"--model"}, "", true},
		{[]string{"resume", "x"}, "", true},
		{[]string{"--dangerously-bypass-approvals-and-sandbox"}, "", true},
	} {
		got, err := codexRemoteModel(tc.args)
		if got != tc.model || (err != nil) != tc.bad {
			t.Errorf("%q: %q %v", tc.args, got, err)
		}
	}
}

// A Codex session the daemon starts tells it the id Codex gave its new
// thread, on the pipe --daemon-report-fd names, once, as a JSON line: the
// real Codex 0.169.0 offline, started as the daemon starts it (the first
// line on its stdin, the target as --session). Codex's app-server does
// not hold the pipe: it reads to its end once ccrelay has reported.
func TestRealCodexReportsThread(t *testing.T) {
	e := codextest.New(t)
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	target := claude.NewSessionID()
	reports, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer reports.Close()
	cmd := exec.Command(binary, "codex", "--remote", "--codex", e.Codex, "--state", t.TempDir(), "--relay", base, "--relay-token", token,
		"--daemon-pipe", "--session", target, "--started-by", claude.NewSessionID(), "--daemon-report-fd", "3")
	cmd.Dir, cmd.Env = e.Project, e.Environ()
	cmd.ExtraFiles = []*os.File{w}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	stdin.Write([]byte(`{"machine":"box"}` + "\n"))
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(reports) // to its end: every holder closed it
		got <- b
	}()
	var report []byte
	select {
	case report = <-got:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no report, or the pipe held open; stderr: %s", stderr.String())
	}
	var m struct{ Thread string }
	if err := json.Unmarshal(report, &m); err != nil || !protocol.IsSessionID(m.Thread) || m.Thread == target || bytes.Count(report, []byte("\n")) != 1 {
		t.Fatalf("report %q (%v); stderr: %s", report, err, stderr.String())
	}
	stdin.Close() // the daemon is gone: the session ends
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatalf("ccrelay codex --remote did not end with its daemon; stderr: %s", stderr.String())
	}
	// Only now is all of its stderr here: Wait waits for the copy of it,
	// which may lag behind the report.
	if !strings.Contains(stderr.String(), "Codex thread "+m.Thread) {
		t.Errorf("the thread reported is not the session's: %s", stderr.String())
	}
}

// The daemon's report pipe is the session's alone: no program the session
// starts holds it, the Codex whose version it reads first included (a
// line written there would be taken as the session's thread, and a
// process that kept it open would keep the daemon's reader waiting after
// the session ended). A fake Codex writes to descriptor 3 whenever it
// runs; nothing of it reaches the pipe.
func TestCodexRemoteReportPipeNotInherited(t *testing.T) {
	dir := t.TempDir()
	const impostor = "0b0e0b0e-0000-4000-8000-00000000c0de"
	fake := filepath.Join(dir, "codex")
	script := "#!/bin/sh\n" +
		"echo '{\"thread\":\"" + impostor + "\"}' >&3 2>/dev/null\n" +
		"if [ \"$1\" = \"--version\" ]; then echo 'codex-cli " + codex.TestedVersion + "'; exit 0; fi\n" +
		"exit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	reports, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer reports.Close()
	cmd := exec.Command(binary, "codex", "--remote", "--codex", fake, "--state", t.TempDir(), "--relay", "http://127.0.0.1:9", "--relay-token", "t",
		"--daemon-pipe", "--session", claude.NewSessionID(), "--started-by", claude.NewSessionID(), "--daemon-report-fd", "3")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "CODEX_HOME="+filepath.Join(dir, ".codex"))
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdin = strings.NewReader(`{"machine":"box"}` + "\n")
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(reports) // to its end: every holder closed it
		got <- b
	}()
	select {
	case b := <-got:
		if len(b) > 0 {
			t.Errorf("the report pipe got %q from the programs ccrelay started; stderr: %s", b, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the report pipe was held open; stderr: %s", stderr.String())
	}
	cmd.Wait()
}
