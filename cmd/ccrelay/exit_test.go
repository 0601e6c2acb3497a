package main

import (
	"bytes"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	screenOn  = "[fake claude screen on]"
	screenOff = "[fake claude screen off]"
)

// closedRelay is the URL of a relay that is stopped: nothing listens there.
func closedRelay(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// Nothing of ccrelay's is written between the start and the end of
// Claude's screen; the line saying where the session goes comes before.
func checkScreen(t *testing.T, stderr, startLine string) {
	t.Helper()
	on, off := strings.Index(stderr, screenOn), strings.Index(stderr, screenOff)
	if on < 0 || off < on {
		t.Fatalf("no screen of Claude's on stderr:\n%s", stderr)
	}
	if between := strings.TrimSpace(stderr[on+len(screenOn) : off]); between != "" {
		t.Fatalf("ccrelay wrote over Claude's screen: %q", between)
	}
	if i := strings.Index(stderr, startLine); i < 0 || i > on {
		t.Fatalf("no %q before Claude's screen:\n%s", startLine, stderr)
	}
}

// The relay stopped: Claude's screen is left alone while it runs (the
// relay's notice waits until it exits); at exit ccrelay says it is sending
// what is left, Ctrl-C ends that in less than a second, and the message
// names the cause. ccrelay exits with Claude's code.
func TestExitRelayStoppedCtrlC(t *testing.T) {
	const session = "11111111-2222-4333-8444-555555555555"
	r := newLocalRun(t, recLines(0, 20), map[string]any{"intervalMs": 10, "exit": 3})
	url := closedRelay(t)
	cmd := r.command("--relay", url, "--session-id", session)
	cmd.Env = append(cmd.Env, "CCRELAY_TOKEN=some-token", "FAKE_CLAUDE_SCREEN=1")
	se := watchStderr(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	se.waitFor(t, "sending the last")
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	out := se.rest()
	err := cmd.Wait()
	took := time.Since(sent)
	if took > time.Second {
		t.Fatalf("ccrelay took %s after Ctrl-C:\n%s", took, out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want Claude's 3:\n%s", err, out)
	}
	checkScreen(t, out, "ccrelay: relaying to "+url+" as ")
	for _, want := range []string{"not sent: stopped (interrupt); cannot reach the relay at " + url + ": connection refused",
		"ccrelay --resume " + session} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "claude --settings") {
		t.Fatalf("a resume hint naming claude:\n%s", out)
	}
}

// A relay that refuses the credential: at exit ccrelay says so at once,
// not that the relay was slow.
func TestExitRelayRefusedToken(t *testing.T) {
	data := t.TempDir()
	srv, base, _ := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	r := newLocalRun(t, recLines(0, 3), nil)
	cmd := r.command("--relay", base)
	cmd.Env = append(cmd.Env, "CCRELAY_TOKEN=not-the-token")
	var se bytes.Buffer
	cmd.Stderr = &se
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("ccrelay: %v\n%s", err, se.String())
	}
	out := se.String()
	if !strings.Contains(out, "not sent: the relay at "+base+" refused the token (wrong or revoked)") ||
		strings.Contains(out, "not everything reached the relay") {
		t.Fatalf("stderr:\n%s", out)
	}
	if took := time.Since(start); took > exitFlushTimeout {
		t.Fatalf("ccrelay took %s with a refused token", took)
	}
}

// Without a relay, the line before Claude says where the session is
// recorded and how to reach a phone; the resume hint is ccrelay's.
func TestStartLineWithoutRelay(t *testing.T) {
	const session = "11111111-2222-4333-8444-555555555555"
	r := newLocalRun(t, recLines(0, 3), nil)
	cmd := r.command("--session-id", session)
	cmd.Env = append(cmd.Env, "FAKE_CLAUDE_SCREEN=1")
	var se bytes.Buffer
	cmd.Stderr = &se
	cmd.Stdout = io.Discard
	if err := cmd.Run(); err != nil {
		t.Fatalf("ccrelay: %v\n%s", err, se.String())
	}
	checkScreen(t, se.String(), "ccrelay: no relay set up: recording to "+r.out+"; run ccrelay setup (or ccrelay login) once to reach a phone")
	if !strings.HasSuffix(se.String(), "ccrelay: to go on with this session: ccrelay --resume "+session+"\n") {
		t.Fatalf("no resume hint at the end:\n%s", se.String())
	}
}
