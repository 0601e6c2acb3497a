package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// answerCutter forwards the CLI's connections to the relay. Armed, it cuts
// the connection as soon as a command has reached the CLI, before anything
// (its answer) goes back, and refuses new connections until let through.
type answerCutter struct {
	addr   string
	ln     net.Listener
	target string
	armed  atomic.Bool
	closed atomic.Bool // refusing connections
	cut    chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func startAnswerCutter(t *testing.T, target string) *answerCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &answerCutter{addr: ln.Addr().String(), ln: ln, target: target, cut: make(chan struct{})}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.closed.Load() {
				c.Close()
				continue
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *answerCutter) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	var commandSeen atomic.Bool
	done := make(chan struct{}, 2)
	go func() { // relay → CLI: plain text frames (no compression, no mask)
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
				if p.armed.Load() && bytes.Contains(buf[:n], []byte(`"type":"command"`)) {
					commandSeen.Store(true)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // CLI → relay: cut before the first bytes after the command
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 && commandSeen.Load() {
				p.closed.Store(true)
				p.once.Do(func() { close(p.cut) })
				return
			}
			if n > 0 {
				if _, werr := s.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	<-done
}

// A prompt's answer is lost with the connection (cut after the command
// reached the CLI, before its answer reached the relay), and the CLI is
// killed before it can reconnect. The restarted CLI gets the prompt again
// from the relay and answers it from its ledger: the prompt ends done,
// once, and Claude got it once.
func TestRemoteLostAnswerNotRunTwice(t *testing.T) {
	buildFakeClaude(t)
	srv, base, token := startServe(t, t.TempDir())
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	cutter := startAnswerCutter(t, strings.TrimPrefix(base, "http://"))
	home, project, state := t.TempDir(), t.TempDir(), t.TempDir()
	inlog := filepath.Join(t.TempDir(), "in")
	const session = "44444444-2222-4333-8444-555555555555"
	startCLI := func() *exec.Cmd {
		cmd := exec.Command(binary, "--remote", "--session", session, "--claude", fakeClaude, "--state", state, "--relay", "http://"+cutter.addr, "--relay-token", token)
		cmd.Dir = project
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_INLOG=" + inlog}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	cli := startCLI()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	app, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.CloseNow()
	rc := &remoteCLI{t: t, session: session, ctx: ctx, app: app}
	rc.send(protocol.Frame{Type: protocol.FrameList})
	for listed := false; !listed; {
		for _, s := range rc.read().Sessions {
			listed = listed || s.ID == session
		}
	}
	cutter.armed.Store(true)
	id := protocol.New()
	rc.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: "only once"}})
	select {
	case <-cutter.cut:
	case <-ctx.Done():
		t.Fatal("the command never reached the CLI")
	}
	// Claude takes the prompt and the CLI records it done; then the CLI
	// dies, its answer unsent.
	for deadline := time.Now().Add(20 * time.Second); ; {
		b, _ := os.ReadFile(inlog)
		ledgers, _ := filepath.Glob(filepath.Join(state, "projects", "*", "commands.jsonl"))
		done := false
		for _, l := range ledgers {
			lb, _ := os.ReadFile(l)
			done = done || strings.Contains(string(lb), `{"id":"`+id+`","s":"done"}`)
		}
		if strings.Contains(string(b), "prompt only once") && done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Claude never took the prompt (Claude's input %q)", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cli.Process.Signal(syscall.SIGKILL)
	cli.Wait()
	cutter.armed.Store(false)
	cutter.closed.Store(false)
	startCLI()
	statuses := map[string]int{}
	for statuses[protocol.StatusDone]+statuses[protocol.StatusRejected] == 0 {
		f := rc.read()
		if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == id {
			statuses[f.Status]++
			if f.Status == protocol.StatusRejected {
				t.Fatalf("rejected: %s", f.Message)
			}
		}
	}
	// A marker: the relay told everything about the prompt before it.
	mark := protocol.New()
	rc.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: mark, Kind: protocol.CommandPrompt, Text: "marker"}})
	for {
		f := rc.read()
		if f.Type != protocol.FrameStatus || f.Command == nil {
			continue
		}
		if f.Command.ID == id {
			statuses[f.Status]++
		}
		if f.Command.ID == mark && f.Status == protocol.StatusDone {
			break
		}
	}
	if statuses[protocol.StatusDone] != 1 {
		t.Fatalf("statuses of the prompt: %v", statuses)
	}
	b, _ := os.ReadFile(inlog)
	if n := strings.Count(string(b), "prompt only once"); n != 1 {
		t.Fatalf("Claude got the prompt %d times:\n%s", n, b)
	}
}

// 50 prompts queued at the relay while the session's CLI is away reach
// Claude in the order sent once it is back, each done once.
func TestRemoteQueuedPromptsInOrder(t *testing.T) {
	buildFakeClaude(t)
	srv, base, token := startServe(t, t.TempDir())
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	home, project, state := t.TempDir(), t.TempDir(), t.TempDir()
	inlog := filepath.Join(t.TempDir(), "in")
	const session = "55555555-2222-4333-8444-555555555555"
	startCLI := func() *exec.Cmd {
		cmd := exec.Command(binary, "--remote", "--session", session, "--claude", fakeClaude, "--state", state, "--relay", base, "--relay-token", token)
		cmd.Dir = project
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_INLOG=" + inlog}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	cli := startCLI()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	app, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.CloseNow()
	rc := &remoteCLI{t: t, session: session, ctx: ctx, app: app}
	rc.send(protocol.Frame{Type: protocol.FrameList})
	for listed := false; !listed; {
		for _, s := range rc.read().Sessions {
			listed = listed || s.ID == session
		}
	}
	cli.Process.Signal(syscall.SIGTERM)
	cli.Wait()
	waitCLIGone(t, base, token, session) // else a prompt may go to the closing connection
	const n = 50
	ids := map[string]bool{}
	for i := range n {
		id := protocol.New()
		ids[id] = true
		rc.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: fmt.Sprint("p", i)}})
	}
	queued := 0
	for queued < n {
		f := rc.read()
		if f.Type == protocol.FrameStatus && ids[f.Command.ID] {
			if f.Status != protocol.StatusQueued {
				t.Fatalf("prompt %s: %s %s", f.Command.ID, f.Status, f.Message)
			}
			queued++
		}
	}
	startCLI()
	done := map[string]int{}
	for len(done) < n {
		f := rc.read()
		if f.Type != protocol.FrameStatus || !ids[f.Command.ID] {
			continue
		}
		switch f.Status {
		case protocol.StatusRejected:
			t.Fatalf("rejected: %s", f.Message)
		case protocol.StatusDone:
			done[f.Command.ID]++
		}
	}
	// A prompt is done once it is in Claude's stdin (after Claude took the
	// first one): the last few may still be on their way to its log.
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ = os.ReadFile(inlog)
		if strings.Count(string(b), "\n") >= n || time.Now().After(deadline) {
			break
		}
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint("prompt p", i))
	}
	if got := strings.Split(strings.TrimSpace(string(b)), "\n"); !slices.Equal(got, want) {
		t.Fatalf("Claude got the prompts in another order:\n%s", b)
	}
}

// waitCLIGone waits until the relay no longer counts a CLI connected for
// session (it notices a closed connection a moment after the process ends).
func waitCLIGone(t *testing.T, base, token, session string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/status?session="+session, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			CLI *bool `json:"cli"`
		}
		json.NewDecoder(res.Body).Decode(&a)
		res.Body.Close()
		if a.CLI != nil && !*a.CLI {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay still counts a CLI connected for %s", session)
		}
		time.Sleep(10 * time.Millisecond) // polling the relay, with a deadline
	}
}
