//go:build linux

package crashmatrix

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// startRelay runs `ccrelay serve` on a free port and returns its URL and
// token; the test stops it.
func startRelay(t *testing.T) (base, token string) {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		re := regexp.MustCompile(`app:\s+(http://[0-9.:]+)/#token=([0-9a-f]+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	select {
	case m := <-found:
		return m[1], m[2]
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve printed no app URL")
	}
	return "", ""
}

// phone is an app on the relay: it lists the sessions, follows one, sends
// commands and keeps every status it hears, as the app sees them.
type phone struct {
	t       *testing.T
	ctx     context.Context
	conn    *websocket.Conn
	session string

	mu       sync.Mutex
	sessions map[string]protocol.SessionSummary
	envs     []protocol.Envelope // of session, in the order stored
	lastSeq  int64
	statuses map[string][]protocol.Frame // command id → its status frames
	live     []string                    // the session's live frames' payloads (token deltas)
	sent     []sentCommand
	closed   bool
	// more, if set, adds to a failure's message (what ccrelay logged).
	more func() string
}

type sentCommand struct {
	session string
	cmd     protocol.Command
}

func dialPhone(t *testing.T, base, token, session string) *phone {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	defer dcancel()
	c, _, err := websocket.Dial(dctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	p := &phone{t: t, ctx: ctx, conn: c, session: session, sessions: map[string]protocol.SessionSummary{}, statuses: map[string][]protocol.Frame{}}
	done := make(chan struct{})
	go p.read(done)
	t.Cleanup(func() { cancel(); c.CloseNow(); <-done })
	p.send(protocol.Frame{Type: protocol.FrameList})
	return p
}

func (p *phone) read(done chan struct{}) {
	defer close(done)
	subscribed := false
	for {
		_, b, err := p.conn.Read(p.ctx)
		if err != nil {
			p.mu.Lock()
			p.closed = true
			p.mu.Unlock()
			return
		}
		var f protocol.Frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		p.mu.Lock()
		switch f.Type {
		case protocol.FrameSessions, protocol.FrameSession:
			for _, s := range f.Sessions {
				p.sessions[s.ID] = s
			}
			if _, ok := p.sessions[p.session]; ok && !subscribed {
				subscribed = true
				go p.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: p.session})
			}
		case protocol.FrameBatch:
			if f.Session == p.session {
				for _, it := range f.Items {
					if it.Seq <= p.lastSeq {
						continue
					}
					if it.Seq != p.lastSeq+1 {
						p.t.Errorf("the relay skipped from seq %d to %d", p.lastSeq, it.Seq)
					}
					p.lastSeq = it.Seq
					var e protocol.Envelope
					if err := json.Unmarshal(it.Envelope, &e); err != nil {
						p.t.Errorf("envelope %d: %v", it.Seq, err)
					}
					p.envs = append(p.envs, e)
				}
			}
		case protocol.FrameLive:
			if f.Session == p.session {
				p.live = append(p.live, string(f.Payload))
			}
		case protocol.FrameStatus:
			if f.Command != nil {
				p.statuses[f.Command.ID] = append(p.statuses[f.Command.ID], f)
			}
		}
		p.mu.Unlock()
	}
}

func (p *phone) send(f protocol.Frame) {
	f.V = protocol.FrameVersion
	b, _ := json.Marshal(f)
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if err := p.conn.Write(ctx, websocket.MessageText, b); err != nil && p.ctx.Err() == nil {
		p.t.Errorf("phone: %v", err)
	}
}

// command sends c (a fresh id) to session and returns its id.
func (p *phone) command(session string, c protocol.Command) string {
	c.ID = protocol.New()
	p.mu.Lock()
	p.sent = append(p.sent, sentCommand{session, c})
	p.mu.Unlock()
	p.send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &c})
	return c.ID
}

// until polls what the phone knows until ok (called with p.mu held) says
// so, within a minute.
func (p *phone) until(what string, ok func() bool) {
	p.t.Helper()
	if !p.within(what, 60*time.Second, ok) {
		more := ""
		if p.more != nil {
			more = p.more()
		}
		p.t.Fatalf("waiting for %s\nenvelopes: %s\nstatus: %s\ncommands: %s\n%s", what, p.describe(), p.status(), p.commands(), more)
	}
}

// within is until without failing: whether ok came within d.
func (p *phone) within(what string, d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		p.mu.Lock()
		done, closed := ok(), p.closed
		p.mu.Unlock()
		if done {
			return true
		}
		if closed {
			p.t.Fatalf("waiting for %s: the phone's connection closed", what)
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// final is the final status (done or rejected) of command id, with its
// message, or "".
func (p *phone) final(id string) (string, string) {
	for _, f := range p.statuses[id] {
		if f.Status == protocol.StatusDone || f.Status == protocol.StatusRejected {
			return f.Status, f.Message
		}
	}
	return "", ""
}

// answered waits for command id's final status.
func (p *phone) answered(id string) (string, string) {
	p.t.Helper()
	p.until("command "+id+" answered", func() bool { s, _ := p.final(id); return s != "" })
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.final(id)
}

// info is the listed info of session.
func (p *phone) info(session string) map[string]any {
	var m map[string]any
	json.Unmarshal(p.sessions[session].Info, &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// status is the followed session's listed status (locks).
func (p *phone) status() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.info(p.session)
	s, _ := i["status"].(string)
	if e, _ := i["error"].(string); e != "" {
		s += " (error: " + e + ")"
	}
	return s
}

func (p *phone) envelopes() []protocol.Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.envs)
}

func (p *phone) describe() string { return describe(p.envelopes()) }

// sawText reports whether an envelope of role holds a text with s.
func (p *phone) sawText(role protocol.Role, s string) bool {
	for _, e := range p.envs {
		if e.Role == role && e.Ev.T == protocol.KindText && strings.Contains(e.Ev.Text, s) {
			return true
		}
	}
	return false
}

// describe is envelopes in short words: U(text) A(text) TS TE(status)
// TCS(call) TCE(call) S(text) …
func describe(envs []protocol.Envelope) string {
	var out []string
	for _, e := range envs {
		out = append(out, describeOne(e))
	}
	return strings.Join(out, " ")
}

func describeOne(e protocol.Envelope) string {
	short := func(s string) string {
		s = strings.ReplaceAll(s, "\n", " ")
		if len(s) > 24 {
			s = s[:24] + "…"
		}
		return s
	}
	switch e.Ev.T {
	case protocol.KindText:
		if e.Role == protocol.RoleUser {
			return "U(" + short(e.Ev.Text) + ")"
		}
		return "A(" + short(e.Ev.Text) + ")"
	case protocol.KindTurnStart:
		return "TS"
	case protocol.KindTurnEnd:
		return "TE(" + string(e.Ev.Status) + ")"
	case protocol.KindToolCallStart:
		return "TCS(" + e.Ev.Call + ")"
	case protocol.KindToolCallEnd:
		return "TCE(" + e.Ev.Call + ")"
	case protocol.KindService:
		return "S(" + short(e.Ev.Text) + ")"
	}
	return string(e.Ev.T)
}

// commands describes the commands sent and the statuses heard (locks).
func (p *phone) commands() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.sent {
		var st []string
		for _, f := range p.statuses[c.cmd.ID] {
			st = append(st, f.Status+" "+f.Message)
		}
		out = append(out, fmt.Sprintf("%s %q %v", c.cmd.Kind, c.cmd.Text, st))
	}
	return strings.Join(out, "; ")
}
