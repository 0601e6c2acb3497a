package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// wsApp is an app on the relay's websocket: it lists the sessions and keeps
// what each last said, and every frame it reads.
type wsApp struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn

	mu       sync.Mutex
	sessions map[string]protocol.SessionSummary
	frames   []protocol.Frame
	closed   bool
}

func dialWSApp(t *testing.T, ctx context.Context, base, token string) *wsApp {
	t.Helper()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	a := &wsApp{t: t, ctx: ctx, conn: c, sessions: map[string]protocol.SessionSummary{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				a.mu.Lock()
				a.closed = true
				a.mu.Unlock()
				return
			}
			var f protocol.Frame
			json.Unmarshal(b, &f)
			a.mu.Lock()
			a.frames = append(a.frames, f)
			if f.Type == protocol.FrameSessions || f.Type == protocol.FrameSession {
				for _, s := range f.Sessions {
					a.sessions[s.ID] = s
				}
			}
			a.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.CloseNow(); <-done })
	a.send(protocol.Frame{Type: protocol.FrameList})
	return a
}

func (a *wsApp) send(f protocol.Frame) {
	a.t.Helper()
	f.V = protocol.FrameVersion
	b, _ := json.Marshal(f)
	if err := a.conn.Write(a.ctx, websocket.MessageText, b); err != nil {
		a.t.Fatal(err)
	}
}

// until polls what the app read until ok says so.
func (a *wsApp) until(what string, ok func() bool) {
	a.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		a.mu.Lock()
		done, closed := ok(), a.closed
		a.mu.Unlock()
		if done {
			return
		}
		if closed || time.Now().After(deadline) {
			a.t.Fatalf("waiting for %s: closed %v", what, closed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// info is a listed session's info, decoded ({} when not listed).
func (a *wsApp) info(id string) map[string]any {
	var m map[string]any
	json.Unmarshal(a.sessions[id].Info, &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// command sends a command and waits for where it ends: "" for done, or the
// reason it was rejected.
func (a *wsApp) command(session string, c protocol.Command) string {
	a.t.Helper()
	c.ID = protocol.New()
	a.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &c})
	var reason string
	rejected := false
	a.until(c.Kind+" answered", func() bool {
		for _, f := range a.frames {
			// The relay refuses some commands itself (a plaintext one to
			// a sealed session), with an error that names the command.
			if f.Type == protocol.FrameError && f.Command != nil && f.Command.ID == c.ID {
				reason = f.Message
				return true
			}
			if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == c.ID {
				switch f.Status {
				case protocol.StatusDone:
					return true
				case protocol.StatusRejected:
					reason, rejected = f.Message, true
					return true
				}
			}
		}
		return false
	})
	if reason == "" && rejected {
		reason = "rejected"
	}
	return reason
}

// saw reports whether a stored envelope of session (subscribed) contains s.
func (a *wsApp) saw(session, s string) bool {
	for _, f := range a.frames {
		if f.Type == protocol.FrameBatch && f.Session == session {
			for _, it := range f.Items {
				if strings.Contains(string(it.Envelope), s) {
					return true
				}
			}
		}
	}
	return false
}

// envelopes are the session's envelopes the app was sent, in order (the
// ones it could read). Called with a.mu held.
func (a *wsApp) envelopes(session string) []protocol.Envelope {
	var out []protocol.Envelope
	for _, f := range a.frames {
		if f.Type == protocol.FrameBatch && f.Session == session {
			for _, it := range f.Items {
				var e protocol.Envelope
				if json.Unmarshal(it.Envelope, &e) == nil {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// daemonRig is a relay and `ccrelay daemon` on fake Claude, in folders of
// the test: HOME (Claude Code's projects), an allowed root with a project.
type daemonRig struct {
	t                                             *testing.T
	relayArgs, daemonEnv                          []string
	data, addr, base, token                       string
	relay, daemon                                 *exec.Cmd
	home, root, project, state, tokenFile, pidlog string
	arglog, script                                string
}

func newDaemonRig(t *testing.T, relayArgs ...string) *daemonRig {
	buildFakeClaude(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &daemonRig{t: t, relayArgs: relayArgs, data: t.TempDir(), addr: ln.Addr().String(), home: t.TempDir(), root: t.TempDir(), state: t.TempDir()}
	ln.Close()
	r.startRelay()
	t.Cleanup(func() {
		if r.daemon != nil {
			r.daemon.Process.Kill()
			r.daemon.Wait()
		}
		r.relay.Process.Signal(syscall.SIGTERM)
		r.relay.Wait()
	})
	r.project = filepath.Join(r.root, "app")
	os.MkdirAll(r.project, 0o700)
	r.tokenFile = filepath.Join(t.TempDir(), "token")
	os.WriteFile(r.tokenFile, []byte(r.token), 0o600)
	aside := t.TempDir()
	r.pidlog, r.arglog, r.script = filepath.Join(aside, "pids"), filepath.Join(aside, "args"), filepath.Join(aside, "stream.json")
	os.WriteFile(r.script, []byte(`{"turns":[{"steps":[{"stream":"hello from claude","chunkMs":1}]}]}`), 0o644)
	return r
}

func (r *daemonRig) startRelay() {
	r.relay, r.base, r.token = startServe(r.t, r.data, append([]string{"--listen", r.addr}, r.relayArgs...)...)
}

func (r *daemonRig) startDaemon(extra ...string) {
	r.t.Helper()
	args := append([]string{"daemon", "--relay", r.base, "--relay-token-file", r.tokenFile, "--state", r.state, "--claude", fakeClaude, "--allow", r.root}, extra...)
	r.daemon = exec.Command(binary, args...)
	r.daemon.Env = append([]string{"HOME=" + r.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + r.script, "FAKE_CLAUDE_PIDLOG=" + r.pidlog, "FAKE_CLAUDE_ARGLOG=" + r.arglog}, r.daemonEnv...)
	if err := r.daemon.Start(); err != nil {
		r.t.Fatal(err)
	}
}

// pastSession writes a past session of Claude Code in the project, asked
// prompt, and returns its id.
func (r *daemonRig) pastSession(prompt string) string {
	r.t.Helper()
	past := claude.NewSessionID()
	pd, _ := claude.ProjectDir(filepath.Join(r.home, ".claude"), r.project)
	os.MkdirAll(pd, 0o700)
	line, _ := json.Marshal(map[string]any{"type": "user", "cwd": r.project, "sessionId": past, "uuid": "11111111-1111-4111-8111-111111111111",
		"timestamp": "2026-11-20T10:00:00Z", "message": map[string]any{"role": "user", "content": prompt}})
	if err := os.WriteFile(claude.TranscriptPath(pd, past), append(line, '\n'), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return past
}

// machine waits for a machine's session in the list and returns its id.
func (a *wsApp) machine() string {
	a.t.Helper()
	var id string
	a.until("the machine listed", func() bool {
		for sid := range a.sessions {
			if a.info(sid)["mode"] == "machine" {
				id = sid
				return true
			}
		}
		return false
	})
	return id
}

// claudes are the fake Claude processes started so far, and which live.
func (r *daemonRig) claudes() (all, alive []int) {
	b, _ := os.ReadFile(r.pidlog)
	for _, l := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(l)
		all = append(all, pid)
		if testutil.ProcessAlive(pid) {
			alive = append(alive, pid)
		}
	}
	return all, alive
}

// From the app: the machine is listed with its folders and past sessions;
// a session starts in an allowed folder with its first prompt and appears
// at once, marked as the daemon's; a folder outside is refused with a
// clear message; a past session is resumed (--resume) and answers; Stop
// ends a session, which says so; the relay restarts under the daemon and
// a running session goes on; the daemon is SIGKILLed with two sessions
// running: no Claude is left, both say the daemon stopped, their history
// is intact.
func TestDaemonFromApp(t *testing.T) {
	r := newDaemonRig(t)
	past := r.pastSession("an old task")
	r.startDaemon()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := dialWSApp(t, ctx, r.base, r.token)
	machine := a.machine()
	var d protocol.DaemonInfo
	a.until("the folders announced", func() bool {
		b, _ := json.Marshal(a.info(machine)["daemon"])
		d = protocol.DaemonInfo{}
		json.Unmarshal(b, &d)
		return len(d.Folders) == 1
	})
	if d.Folders[0].Dir != r.project || len(d.Folders[0].Sessions) != 1 || d.Folders[0].Sessions[0].Prompt != "an old task" || d.OS == "" {
		t.Fatalf("the machine announced %+v", d)
	}

	// Outside the allowed folders: refused, and why.
	if got := a.command(machine, protocol.Command{Kind: protocol.CommandStart, Dir: t.TempDir(), Target: claude.NewSessionID(), Text: "hi"}); !strings.Contains(got, "outside the folders this machine allows") {
		t.Fatalf("a folder outside: %q", got)
	}

	// New session, from the app.
	s1 := claude.NewSessionID()
	if got := a.command(machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.project, Target: s1, Text: "hello daemon", Mode: "acceptEdits"}); got != "" {
		t.Fatalf("start refused: %s", got)
	}
	a.until("the new session listed as the daemon's", func() bool { return a.info(s1)["startedBy"] == machine })
	a.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	a.until("the first prompt answered", func() bool { return a.saw(s1, "hello daemon") && a.saw(s1, "hello from claude") })

	// Resume a past session.
	if got := a.command(machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.project, Target: past, Resume: true}); got != "" {
		t.Fatalf("resume refused: %s", got)
	}
	a.until("the resumed session listed", func() bool { return a.info(past)["startedBy"] == machine })
	a.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: past})
	if got := a.command(past, protocol.Command{Kind: protocol.CommandPrompt, Text: "and now?"}); got != "" {
		t.Fatalf("prompt to the resumed session: %s", got)
	}
	a.until("the resumed session answers", func() bool { return a.saw(past, "hello from claude") })
	if b, _ := os.ReadFile(r.arglog); !strings.Contains(string(b), `"--resume=`+past+`"`) || !strings.Contains(string(b), `"--permission-mode=acceptEdits"`) {
		t.Fatalf("Claude's arguments:\n%s", b)
	}

	// Stop.
	if got := a.command(machine, protocol.Command{Kind: protocol.CommandStop, Target: s1}); got != "" {
		t.Fatalf("stop refused: %s", got)
	}
	a.until("the stopped session says so", func() bool {
		e, _ := a.info(s1)["error"].(string)
		return strings.Contains(e, "Stopped from the app") && a.saw(s1, "Stopped from the app")
	})

	// The relay restarts under the daemon: the running session goes on.
	r.relay.Process.Signal(syscall.SIGTERM)
	r.relay.Wait()
	r.startRelay()
	a = dialWSApp(t, ctx, r.base, r.token)
	a.until("the machine and the session listed again", func() bool {
		return a.info(machine)["mode"] == "machine" && a.info(past)["startedBy"] == machine
	})
	a.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: past})
	if got := a.command(past, protocol.Command{Kind: protocol.CommandPrompt, Text: "after the restart"}); got != "" {
		t.Fatalf("prompt after the relay restarted: %s", got)
	}
	a.until("the answer after the restart", func() bool { return a.saw(past, "after the restart") })

	// A second running session, then the daemon is SIGKILLed.
	s2 := claude.NewSessionID()
	if got := a.command(machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.project, Target: s2, Text: "second"}); got != "" {
		t.Fatalf("start refused: %s", got)
	}
	a.until("the second session listed", func() bool { return a.info(s2)["startedBy"] == machine })
	a.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: s2})
	a.until("the second session answers", func() bool { return a.saw(s2, "hello from claude") })
	if _, alive := r.claudes(); len(alive) != 2 {
		t.Fatalf("%d Claudes alive before the kill, want 2", len(alive))
	}
	r.daemon.Process.Kill()
	r.daemon.Wait()
	r.daemon = nil
	for _, s := range []string{past, s2} {
		a.until("session "+s+" says the daemon stopped", func() bool {
			e, _ := a.info(s)["error"].(string)
			return strings.Contains(e, "daemon that ran this session stopped") && a.saw(s, "daemon that ran this session stopped")
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, alive := r.claudes()
		// Each session's ccrelay holds its lock file until it exits.
		left, _ := filepath.Glob(filepath.Join(r.state, "daemon", "running", "*.lock"))
		alive = append(alive, make([]int, len(left))...)
		if len(alive) == 0 {
			if len(all) < 3 {
				t.Fatalf("only %d Claudes were started", len(all))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Claudes (or sessions' ccrelay: 0) left running after the daemon was killed: %v", alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// History intact: what each session said before is still there.
	b := dialWSApp(t, ctx, r.base, r.token)
	b.until("listed", func() bool { return len(b.sessions) >= 3 })
	b.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: s2})
	b.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: past})
	b.until("the history of both", func() bool {
		return b.saw(s2, "second") && b.saw(s2, "hello from claude") && b.saw(s2, "daemon that ran this session stopped") &&
			b.saw(past, "after the restart") && b.saw(past, "daemon that ran this session stopped")
	})
}

// ccrelay attach takes over in a terminal a session started from the app:
// the daemon's ccrelay for it ends (and with it its Claude), then Claude
// resumes the session in its folder, wherever attach was run; a session
// Claude Code does not have is refused.
func TestDaemonAttach(t *testing.T) {
	r := newDaemonRig(t)
	r.startDaemon()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := dialWSApp(t, ctx, r.base, r.token)
	machine := a.machine()
	s1 := claude.NewSessionID()
	if got := a.command(machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.project, Target: s1, Text: "begin on the phone"}); got != "" {
		t.Fatal(got)
	}
	a.until("the session listed", func() bool { return a.info(s1)["startedBy"] == machine })
	a.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	a.until("answered", func() bool { return a.saw(s1, "hello from claude") })
	_, alive := r.claudes()
	if len(alive) != 1 {
		t.Fatalf("%d Claudes alive, want 1", len(alive))
	}

	attach := func(session string) (string, error) {
		cmd := exec.Command(binary, "attach", session, "--relay", r.base, "--relay-token-file", r.tokenFile, "--state", r.state, "--claude", fakeClaude)
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_PIDLOG=" + r.pidlog, "FAKE_CLAUDE_ARGLOG=" + r.arglog}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := attach(claude.NewSessionID()); err == nil || !strings.Contains(out, "has no session") {
		t.Fatalf("attach to an unknown session: %v\n%s", err, out)
	}
	out, err := attach(s1)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, out)
	}
	if !strings.Contains(out, "resuming "+s1+" in "+r.project) || !strings.Contains(out, "stopping it there first") {
		t.Fatalf("attach said:\n%s", out)
	}
	for deadline := time.Now().Add(20 * time.Second); testutil.ProcessAlive(alive[0]); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", alive[0]))
			t.Fatalf("the daemon's Claude %d still runs: %s", alive[0], st)
		}
	}
	args, _ := os.ReadFile(r.arglog)
	lines := strings.Split(strings.TrimSpace(string(args)), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"--resume"`) || !strings.Contains(last, s1) || strings.Contains(last, "stream-json") {
		t.Fatalf("the terminal's Claude ran with %s", last)
	}
	if left, _ := filepath.Glob(filepath.Join(r.state, "daemon", "running", "*.lock")); len(left) > 0 {
		t.Fatalf("the daemon's session still holds its lock: %v", left)
	}
}
