package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// demoOutput runs `ccrelay demo` with args until it says it serves (or
// exits) and returns what it printed; the demo is stopped when the test
// ends.
func demoOutput(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"demo"}, args...)...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	var sb strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "press Ctrl-C") {
			break
		}
	}
	go io.Copy(io.Discard, out)
	return sb.String()
}

var appLine = regexp.MustCompile(`(?m)^\s+app:\s+http://(127\.0\.0\.1:\d+)/#token=([0-9a-f]+)$`)

// The demo's session reads as a finished piece of work on a project: the
// relay lists it announced with its folder, this machine and the model,
// idle, marked as a recording (apps say so); its history ends with the last turn completed.
func TestDemo(t *testing.T) {
	out := demoOutput(t, "--listen", "127.0.0.1:0")
	m := appLine.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "(/home/dev/greet): 116 records from 2 files, 53 envelopes stored in the relay") {
		t.Fatalf("demo output:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+m[1]+"/ws/app", &websocket.DialOptions{Subprotocols: []string{"ccrelay-token." + m[2]}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(32 << 20)
	send := func(f protocol.Frame) {
		f.V = protocol.FrameVersion
		b, _ := json.Marshal(f)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	next := func(typ string) protocol.Frame {
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("waiting for %s: %v", typ, err)
			}
			var f protocol.Frame
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			if f.Type == typ || typ == "" {
				return f
			}
		}
	}
	send(protocol.Frame{Type: protocol.FrameList})
	list := next(protocol.FrameSessions)
	if len(list.Sessions) != 1 {
		t.Fatalf("sessions: %+v", list.Sessions)
	}
	s := list.Sessions[0]
	var info struct {
		Cwd, Machine, Model, Status, Mode string
		Recording                         bool
	}
	if err := json.Unmarshal(s.Info, &info); err != nil {
		t.Fatalf("info %s: %v", s.Info, err)
	}
	host, _ := os.Hostname()
	if info.Cwd != "/home/dev/greet" || info.Machine != host || info.Model != "claude-opus-5-5" || info.Status != "idle" || info.Mode != "" || !info.Recording {
		t.Errorf("announced %s", s.Info)
	}
	if !strings.HasPrefix(s.Prompt, "Add a --shout flag to greet") {
		t.Errorf("first prompt %q", s.Prompt)
	}
	send(protocol.Frame{Type: protocol.FrameSubscribe, Session: s.ID})
	var last protocol.Envelope
	for n := 0; ; {
		f := next("")
		if f.Type == protocol.FrameCaughtUp {
			if int64(n) != s.LastSeq {
				t.Fatalf("%d envelopes, listed %d", n, s.LastSeq)
			}
			break
		}
		for _, it := range f.Items {
			n++
			if err := json.Unmarshal(it.Envelope, &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	if last.Ev.T != protocol.KindTurnEnd || last.Ev.Status != protocol.StatusCompleted {
		t.Errorf("the session ends with %s %s, want its turn completed", last.Ev.T, last.Ev.Status)
	}
}

// The demo is not a service: with its port taken it listens on a free one
// and says so, rather than failing on the bind.
func TestDemoFallsBackToAFreePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	res := run(t, "demo", "--exit", "--listen", taken)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	_, port, _ := net.SplitHostPort(taken)
	m := appLine.FindStringSubmatch(res.stdout)
	if m == nil || m[1] == taken || !strings.Contains(res.stdout, "port "+port+" is in use, so the demo listens on a free port instead: "+m[1]) {
		t.Fatalf("demo with %s taken:\n%s", taken, res.stdout)
	}
}

// Listening on every address, the demo prints the app URL on 127.0.0.1
// and, as serve does over plain http, no phone URL: plain http answers
// only this machine (a phone needs HTTPS: docs/deploy.md).
func TestDemoListensEverywhere(t *testing.T) {
	res := run(t, "demo", "--exit", "--listen", "0.0.0.0:0")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if m := appLine.FindStringSubmatch(res.stdout); m == nil {
		t.Fatalf("no app URL:\n%s", res.stdout)
	}
	if strings.Contains(res.stdout, "phone:") {
		t.Errorf("a plain-http phone URL:\n%s", res.stdout)
	}
}
