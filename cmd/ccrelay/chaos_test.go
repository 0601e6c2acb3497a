package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	_ "modernc.org/sqlite"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
)

// chaosCommands is how many commands (prompts and permission answers) the
// chaos test's app sends; chaosKills how many times it SIGKILLs the relay
// and, as many times, the CLI.
const (
	chaosCommands = 500
	chaosKills    = 3
)

// chaosCommand is what the app knows of a command it sent.
type chaosCommand struct {
	cmd    protocol.Command
	prompt int // index of a prompt, -1 for a permission answer
	status string
	msg    string
}

// An app sends 500 prompts and permission answers to a remote session (fake
// Claude asking a permission in every turn) while the relay is SIGKILLed 3
// times and the CLI 3 times, each restarted on the same folders. Every
// command ends done or rejected with a reason, at the app and in the store;
// every prompt done reached Claude once, a rejected one at most once, none
// twice, in the order sent.
func TestRemoteChaos(t *testing.T) {
	buildFakeClaude(t)
	data := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var srv *exec.Cmd
	var base, token string
	startRelay := func() {
		srv, base, token = startServe(t, data, "--listen", addr)
	}
	startRelay()
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()

	home, project, state := t.TempDir(), t.TempDir(), t.TempDir()
	inlog := filepath.Join(t.TempDir(), "in")
	script := filepath.Join(t.TempDir(), "stream.json")
	os.WriteFile(script, []byte(`{"turns":[{"steps":[{"tool":{"id":"toolu_*","name":"Bash","input":{"command":"ls"},"ask":true,"result":"ok"}},{"text":"ran"}]}]}`), 0o644)
	const session = "66666666-2222-4333-8444-555555555555"
	var cli *exec.Cmd
	startCLI := func() {
		cli = exec.Command(binary, "--remote", "--session", session, "--claude", fakeClaude, "--state", state, "--relay", base, "--relay-token", token)
		cli.Dir = project
		cli.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_INLOG=" + inlog, "FAKE_CLAUDE_STREAM=" + script}
		if err := cli.Start(); err != nil {
			t.Fatal(err)
		}
		c := cli
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	startCLI()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var app *websocket.Conn
	var frames chan protocol.Frame
	sent := map[string]*chaosCommand{}
	var order []string
	send := func(c protocol.Command) {
		b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: session, Command: &c})
		app.Write(ctx, websocket.MessageText, b) // a lost write is resent after reconnecting
	}
	connect := func() {
		for {
			c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
			if err == nil {
				app = c
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("app cannot reconnect: %v", err)
			}
			time.Sleep(20 * time.Millisecond) // polling for the restarted relay
		}
		app.SetReadLimit(-1)
		ch := make(chan protocol.Frame, 64)
		frames = ch
		go func(c *websocket.Conn) { // ends when the connection does
			defer close(ch)
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				var f protocol.Frame
				if json.Unmarshal(b, &f) == nil {
					ch <- f
				}
			}
		}(app)
		b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameList})
		app.Write(ctx, websocket.MessageText, b)
		for _, id := range order { // resent ids hear every later status
			if c := sent[id]; c.status != protocol.StatusDone && c.status != protocol.StatusRejected {
				send(c.cmd)
			}
		}
	}
	connect()
	defer func() { app.CloseNow() }()

	final := func(s string) bool { return s == protocol.StatusDone || s == protocol.StatusRejected }
	prompts, credit, open := 0, 4, 0
	answered := map[string]string{} // request → the answer's command id
	listed := false                 // commands for a session the relay does not know yet are refused
	var pending []string            // permission requests the session shows
	relayKills, cliKills := 0, 0
	killEvery := chaosCommands / (2*chaosKills + 1)
	var killPrompt, killWant string // a prompt sent to kill as it reaches Claude
	kill := func() {
		if relayKills <= cliKills {
			srv.Process.Signal(syscall.SIGKILL)
			srv.Wait()
			relayKills++
			app.CloseNow()
			startRelay()
			connect()
		} else {
			cli.Process.Signal(syscall.SIGKILL)
			cli.Wait()
			cliKills++
			credit = prompts + 4 // the prompts Claude had queued died with it
			startCLI()
		}
	}
	for {
		if listed && killPrompt == "" && len(order) >= (relayKills+cliKills+1)*killEvery && relayKills+cliKills < 2*chaosKills {
			// Kill when a prompt has just reached Claude: its answer is on its
			// way, so the restarted side must not carry it out again.
			c := protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: fmt.Sprint("p", prompts)}
			sent[c.ID] = &chaosCommand{cmd: c, prompt: prompts}
			order = append(order, c.ID)
			killPrompt, killWant = c.ID, fmt.Sprintf("prompt p%d\n", prompts)
			prompts++
			open++
			send(c)
		}
		if killPrompt != "" {
			b, _ := os.ReadFile(inlog)
			if strings.Contains(string(b), killWant) || final(sent[killPrompt].status) {
				killPrompt = ""
				kill()
			}
		}
		if listed && len(order) < chaosCommands && prompts < credit && open < 8 {
			c := protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: fmt.Sprint("p", prompts)}
			sent[c.ID] = &chaosCommand{cmd: c, prompt: prompts}
			order = append(order, c.ID)
			prompts++
			open++
			send(c)
		}
		for _, r := range pending {
			// A request still shown after its answer was rejected (no CLI
			// was connected then) is answered again, as a user would; past
			// the budget too (the prompts queued behind its turn are taken
			// only once it ends).
			if a := sent[answered[r]]; a != nil && a.status != protocol.StatusRejected {
				continue
			}
			c := protocol.Command{ID: protocol.New(), Kind: protocol.CommandPermission, RequestID: r, Allow: true}
			answered[r] = c.ID
			sent[c.ID] = &chaosCommand{cmd: c, prompt: -1}
			order = append(order, c.ID)
			open++
			credit++
			send(c)
		}
		if len(order) >= chaosCommands && open == 0 {
			break
		}
		var f protocol.Frame
		var ok bool
		var poll <-chan time.Time
		if killPrompt != "" {
			poll = time.After(time.Millisecond) // look at Claude's input again
		}
		select {
		case <-poll:
			continue
		case f, ok = <-frames:
		case <-ctx.Done():
			b, _ := os.ReadFile(inlog)
			t.Fatalf("%d of %d commands sent, %d not final; kills: relay %d, CLI %d; prompts %d, credit %d; requests shown %v (answers: %v); Claude's input ends %q",
				len(order), chaosCommands, open, relayKills, cliKills, prompts, credit, pending, answersTo(sent, pending), b[max(0, len(b)-30):])
		}
		if !ok {
			// The relay went away without being killed here: wait for it.
			app.CloseNow()
			connect()
			continue
		}
		switch f.Type {
		case protocol.FrameStatus:
			c := sent[f.Command.ID]
			if c == nil || final(c.status) {
				if c != nil && f.Status != c.status {
					t.Errorf("command %s was %s, now %s %q", f.Command.ID, c.status, f.Status, f.Message)
				}
				continue
			}
			c.status, c.msg = f.Status, f.Message
			if final(f.Status) {
				open--
				if f.Status == protocol.StatusRejected && f.Message == "" {
					t.Errorf("command %s rejected without a reason", f.Command.ID)
				}
			}
		case protocol.FrameError:
			t.Errorf("relay: %s %s", f.Code, f.Message)
		case protocol.FrameSessions, protocol.FrameSession:
			for _, s := range f.Sessions {
				if s.ID != session {
					continue
				}
				var info struct {
					Permissions []struct {
						ID string `json:"id"`
					} `json:"permissions"`
				}
				json.Unmarshal(s.Info, &info)
				listed = true
				pending = nil
				for _, p := range info.Permissions {
					pending = append(pending, p.ID)
				}
			}
		}
	}

	if relayKills != chaosKills || cliKills != chaosKills {
		t.Fatalf("kills: relay %d, CLI %d", relayKills, cliKills)
	}

	// The store says the same after a clean stop.
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	db, err := sql.Open("sqlite", filepath.Join(data, relay.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, status, message FROM commands WHERE session = ?`, session)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string][2]string{}
	for rows.Next() {
		var id, st, msg string
		rows.Scan(&id, &st, &msg)
		stored[id] = [2]string{st, msg}
	}
	rows.Close()
	startRelay() // for the deferred stop

	count := map[string]int{}
	for _, id := range order {
		c := sent[id]
		count[c.status]++
		s, ok := stored[id]
		switch {
		case !ok:
			t.Errorf("command %s (%s) not in the store", id, c.cmd.Kind)
		case s[0] != c.status:
			t.Errorf("command %s (%s): %s %q in the store, %s %q at the app", id, c.cmd.Kind, s[0], s[1], c.status, c.msg)
		case s[0] == protocol.StatusRejected && s[1] == "":
			t.Errorf("command %s rejected without a reason in the store", id)
		}
	}

	// What Claude received: every prompt at most once, in order; every done
	// prompt exactly once.
	// A prompt is done once it is in Claude's stdin: the last ones may
	// still be on their way to its log.
	lastDone := ""
	for _, id := range order {
		if c := sent[id]; c.prompt >= 0 && c.status == protocol.StatusDone {
			lastDone = fmt.Sprintf("prompt p%d\n", c.prompt)
		}
	}
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ = os.ReadFile(inlog)
		if strings.Contains(string(b), lastDone) || time.Now().After(deadline) {
			break
		}
	}
	seen := map[int]int{}
	last := -1
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		n, err := strconv.Atoi(strings.TrimPrefix(line, "prompt p"))
		if err != nil {
			t.Fatalf("Claude's input: %q", line)
		}
		seen[n]++
		if n <= last {
			t.Errorf("Claude got prompt p%d after p%d", n, last)
		}
		last = n
	}
	rejectedRun, rejectedNot, reasons := 0, 0, map[string]int{}
	for _, id := range order {
		c := sent[id]
		if c.prompt < 0 {
			if c.status == protocol.StatusRejected {
				reasons["permission: "+c.msg]++
			}
			continue
		}
		switch n := seen[c.prompt]; {
		case n > 1:
			t.Errorf("prompt p%d reached Claude %d times (%s)", c.prompt, n, c.status)
		case c.status == protocol.StatusDone && n != 1:
			// done means Claude echoed the prompt: it cannot have missed
			// Claude, even when the CLI was killed with it in the pipe.
			t.Errorf("prompt p%d done but never reached Claude", c.prompt)
		case c.status == protocol.StatusRejected:
			reasons["prompt: "+c.msg]++
			if n == 1 {
				rejectedRun++
			} else {
				rejectedNot++
			}
		}
	}
	t.Logf("%d commands (%d prompts): %v; kills: relay %d, CLI %d; rejected prompts that reached Claude %d, that did not %d; reasons %v",
		len(order), prompts, count, relayKills, cliKills, rejectedRun, rejectedNot, reasons)
}

// answersTo lists the app's answers to requests and what became of them.
func answersTo(sent map[string]*chaosCommand, requests []string) []string {
	var out []string
	for _, c := range sent {
		if slices.Contains(requests, c.cmd.RequestID) {
			out = append(out, c.cmd.RequestID+" "+c.status+" "+c.msg)
		}
	}
	return out
}
