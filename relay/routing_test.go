package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// announceCLI connects a CLI that announces sessions.
func announceCLI(t *testing.T, r *testRelay, sessions ...string) *websocket.Conn {
	t.Helper()
	c := r.dial(t, testToken, "/ws/cli")
	for _, s := range sessions {
		send(t, c, protocol.Frame{Type: protocol.FrameAnnounce, Session: s, Info: json.RawMessage(`{}`)})
		if f := recv(t, c); f.Type != protocol.FrameAck {
			t.Fatalf("announce: %+v", f)
		}
	}
	return c
}

// nextStatus reads frames until a command status, which it returns.
func nextStatus(t *testing.T, c *websocket.Conn) protocol.Frame {
	t.Helper()
	for {
		if f := recv(t, c); f.Type == protocol.FrameStatus {
			return f
		}
	}
}

// The CLI's answer reaches the relay before the relay records that it
// handed the command over: the command ends done, stays done, and the app
// is never told delivered after done.
func TestCommandDoneBeforeDelivered(t *testing.T) {
	r := startTestRelay(t)
	// Announced twice: the second ack comes once the relay's CLI handler
	// is done with the first (it hands out queued commands after it), so
	// the handler reads the answer below.
	cli := announceCLI(t, r, s1, s1)
	answered := make(chan protocol.Frame, 1)
	hook := func(id string) {
		// The seam: the CLI answers, and the relay acknowledges it, while
		// "delivered" is not recorded yet. (Not t.Fatal: another goroutine.)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		read := func() protocol.Frame {
			var f protocol.Frame
			if _, b, err := cli.Read(ctx); err == nil {
				json.Unmarshal(b, &f)
			}
			return f
		}
		if f := read(); f.Type != protocol.FrameCommand || f.Command.ID != id {
			t.Errorf("the CLI got %+v", f)
		}
		b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameResult, Ref: "r1", Session: s1, Command: &protocol.Command{ID: id}, Status: protocol.StatusDone})
		cli.Write(ctx, websocket.MessageText, b)
		answered <- read()
	}
	r.relay.beforeDelivered.Store(&hook)
	app := r.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "go"}})
	if f := <-answered; f.Type != protocol.FrameAck {
		t.Fatalf("the CLI's answer: %+v", f)
	}
	if f := nextStatus(t, app); f.Status != protocol.StatusDone {
		t.Fatalf("first status %+v", f)
	}
	// A marker command: every status of p1 came before its own.
	r.relay.beforeDelivered.Store(nil)
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "m1", Kind: protocol.CommandAbort}})
	if f := nextStatus(t, app); f.Command.ID != "m1" {
		t.Fatalf("p1 told again after done: %+v", f)
	}
	c, err := r.store.Command(context.Background(), OwnerID(testToken), s1, "p1")
	if err != nil || c.Status != protocol.StatusDone {
		t.Fatalf("stored %+v %v", c, err)
	}
}

// Every app connection that follows the session hears its commands'
// statuses, and an app that reconnects and resends an id hears the changes
// after that.
func TestStatusesToEveryFollower(t *testing.T) {
	r := startTestRelay(t)
	cli := announceCLI(t, r, s1)
	watcher := r.dial(t, testToken, "/ws/app")
	send(t, watcher, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	if f := recv(t, watcher); f.Type != protocol.FrameCaughtUp {
		t.Fatalf("%+v", f)
	}
	sender := r.dial(t, testToken, "/ws/app")
	send(t, sender, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "go"}})
	if f := recv(t, cli); f.Command == nil || f.Command.ID != "p1" {
		t.Fatalf("%+v", f)
	}
	for _, app := range []*websocket.Conn{sender, watcher} {
		if f := nextStatus(t, app); f.Status != protocol.StatusDelivered {
			t.Fatalf("%+v", f)
		}
	}
	// The sender's connection drops; it comes back and resends the id.
	sender.CloseNow()
	again := r.dial(t, testToken, "/ws/app")
	send(t, again, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "go"}})
	if f := nextStatus(t, again); f.Status != protocol.StatusDelivered {
		t.Fatalf("resent: %+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected, Message: "no"})
	recv(t, cli)
	for name, app := range map[string]*websocket.Conn{"the reconnected app": again, "the watcher": watcher} {
		if f := nextStatus(t, app); f.Status != protocol.StatusRejected || f.Message != "no" {
			t.Fatalf("%s: %+v", name, f)
		}
	}
}

// However many list frames an app sends, it has one lister: a session
// change reaches it once.
func TestOneListerPerConnection(t *testing.T) {
	r := startTestRelay(t)
	announceCLI(t, r, s1)
	app := r.dial(t, testToken, "/ws/app")
	for range 3 {
		send(t, app, protocol.Frame{Type: protocol.FrameList})
		if f := recv(t, app); f.Type != protocol.FrameSessions {
			t.Fatalf("%+v", f)
		}
	}
	announceCLI(t, r, s2, a1)
	var got []string
	for len(got) < 2 {
		f := recv(t, app)
		if f.Type == protocol.FrameSession {
			got = append(got, f.Sessions[0].ID)
		}
	}
	if !slices.Equal(got, []string{s2, a1}) {
		t.Fatalf("session changes %v, want each once: %v", got, []string{s2, a1})
	}
}

// routeOne sends a prompt for session and returns how long it took from
// the app to the CLI.
func routeOne(ctx context.Context, app, cli *websocket.Conn, session string) (time.Duration, error) {
	start := time.Now()
	b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: session,
		Command: &protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: "go"}})
	if err := app.Write(ctx, websocket.MessageText, b); err != nil {
		return 0, err
	}
	for {
		_, b, err := cli.Read(ctx)
		if err != nil {
			return 0, err
		}
		var f protocol.Frame
		json.Unmarshal(b, &f)
		if f.Type == protocol.FrameCommand {
			return time.Since(start), nil
		}
	}
}

func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// stall connects a CLI for session that reads nothing, then has an app
// send it large prompts (more than the socket buffers take) until done is
// closed.
func stall(ctx context.Context, t testing.TB, r *testRelay, session string, done <-chan struct{}) {
	stalled := r.dialTB(t, testToken, "/ws/cli")
	b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameAnnounce, Session: session, Info: json.RawMessage(`{}`)})
	stalled.Write(ctx, websocket.MessageText, b)
	stalled.Read(ctx) // the ack, and nothing more
	app := r.dialTB(t, testToken, "/ws/app")
	big := strings.Repeat("x", 200<<10)
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		default:
		}
		b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: session,
			Command: &protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: big}})
		if app.Write(ctx, websocket.MessageText, b) != nil {
			return
		}
	}
}

// routeWithStall routes n prompts of session s2 while a CLI connection of
// session s1 reads nothing and large commands pile up for it; it returns
// their routing latencies.
func routeWithStall(t testing.TB, n int) []time.Duration {
	r := startTestRelay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := r.dialTB(t, testToken, "/ws/cli")
	b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{}`)})
	cli.Write(ctx, websocket.MessageText, b)
	cli.Read(ctx)
	app := r.dialTB(t, testToken, "/ws/app")
	done := make(chan struct{})
	stalled := make(chan struct{})
	go func() { defer close(stalled); stall(ctx, t, r, s1, done) }()
	var lat []time.Duration
	for range n {
		d, err := routeOne(ctx, app, cli, s2)
		if err != nil {
			t.Fatal(err)
		}
		lat = append(lat, d)
	}
	close(done)
	<-stalled
	return lat
}

// A CLI connection that reads nothing, while large commands pile up for
// it, does not slow the routing of another session's commands: the relay
// never waits on its socket while other sessions need the routing.
func TestStalledConnectionDoesNotStallOthers(t *testing.T) {
	lat := routeWithStall(t, 200)
	t.Logf("routing latency with a stalled connection: p99 %v, max %v", p99(lat), slices.Max(lat))
	if m := slices.Max(lat); m > 2*time.Second {
		t.Fatalf("a command waited %v to be routed while another connection stalled (p99 %v)", m, p99(lat))
	}
}

// BenchmarkRoutingWithStalledConnection reports the p99 routing latency of
// 200 commands while another session's connection stalls.
func BenchmarkRoutingWithStalledConnection(b *testing.B) {
	for b.Loop() {
		lat := routeWithStall(b, 200)
		b.ReportMetric(float64(p99(lat).Microseconds()), "p99-µs")
		b.ReportMetric(float64(slices.Max(lat).Microseconds()), "max-µs")
	}
}

// A status never goes back nor leaves a final state, in any order of steps.
func TestCommandStatusOneWay(t *testing.T) {
	st := openTestStore(t, t.TempDir()+"/relay.db")
	ctx := context.Background()
	if err := st.Claim(ctx, s1, "o"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		steps []string
		want  string
	}{
		{[]string{"delivered", "done"}, "done"},
		{[]string{"done", "delivered"}, "done"},
		{[]string{"delivered", "rejected", "done"}, "rejected"},
		{[]string{"done", "rejected"}, "done"},
		{[]string{"rejected", "delivered", "done"}, "rejected"},
		{[]string{"delivered", "delivered"}, "delivered"},
	} {
		id := protocol.New()
		if _, _, err := st.AddCommand(ctx, "o", s1, id, []byte(`{}`), "queued", ""); err != nil {
			t.Fatal(err)
		}
		for _, step := range tc.steps {
			if _, _, err := st.AdvanceCommand(ctx, "o", s1, id, step, ""); err != nil {
				t.Fatal(err)
			}
		}
		if c, _ := st.Command(ctx, "o", s1, id); c.Status != tc.want {
			t.Errorf("%v: %s, want %s", tc.steps, c.Status, tc.want)
		}
	}
	if _, _, err := st.AdvanceCommand(ctx, "o", s1, "x", "queued", ""); err == nil {
		t.Error("a step back to queued was taken")
	}
}

// A connection's queue holds at most PeerQueue frames and PeerQueueBytes
// bytes; past either, send refuses and the connection is dropped.
func TestPeerQueueBounded(t *testing.T) {
	small := protocol.Frame{Type: protocol.FrameStatus, Session: s1, Command: &protocol.Command{ID: "c1"}, Status: protocol.StatusDone}
	big := protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "c1", Kind: protocol.CommandPrompt, Text: strings.Repeat("x", 200<<10)}}
	for _, tc := range []struct {
		name string
		f    protocol.Frame
		fits int
	}{
		{"frames", small, PeerQueue},
		{"bytes", big, PeerQueueBytes / (200<<10 + 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPeer(nil, "o")
			for i := range tc.fits {
				if !p.send(tc.f) {
					t.Fatalf("frame %d refused", i)
				}
			}
			select {
			case <-p.dropped:
				t.Fatal("dropped within the bounds")
			default:
			}
			// At most one more fits (the byte bound is not a multiple of
			// the frame's size).
			for extra := 0; p.send(tc.f); extra++ {
				if extra == 1 {
					t.Fatal("no bound")
				}
			}
			select {
			case <-p.dropped:
			default:
				t.Fatal("not dropped past the bound")
			}
		})
	}
}

// An app that acts on a session as soon as a CLI's announce or envelopes
// show it finds that CLI: the relay knows the owner before it tells the
// apps (a permission-mode change sent on seeing the session was rejected
// "no CLI is connected").
func TestOwnerKnownBeforeAppsSeeSession(t *testing.T) {
	r := startTestRelay(t)
	var unowned atomic.Int64 // apps told of a session whose owner the relay did not know
	hook := func(session string) {
		r.relay.peersMu.Lock()
		if r.relay.owners[session] == nil {
			unowned.Add(1)
		}
		r.relay.peersMu.Unlock()
	}
	r.relay.shown.Store(&hook)
	for i := range 30 {
		session := fmt.Sprintf("5e55a001-0000-4000-8000-%012d", 100+i)
		app := dial(t, r.srv, "/ws/app")
		send(t, app, protocol.Frame{Type: protocol.FrameList})
		recv(t, app) // the list, before the session exists
		cli := dial(t, r.srv, "/ws/cli")
		if i%2 == 0 {
			send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Info: json.RawMessage(`{"mode":"remote","status":"idle"}`)})
		} else {
			e := protocol.Envelope{ID: protocol.DeriveID(session, "x"), Time: 1, Role: protocol.RoleUser, Ev: protocol.Event{T: protocol.KindText, Text: "hi"}}
			b, _ := e.AppendJSON(nil)
			send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: session, Envelopes: []json.RawMessage{b}})
		}
		for seen := false; !seen; {
			f := recv(t, app)
			for _, s := range f.Sessions {
				seen = seen || s.ID == session
			}
		}
		cmd := &protocol.Command{ID: protocol.New(), Kind: protocol.CommandPermissionMode, Mode: "plan"}
		send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: cmd})
		for {
			f := recv(t, app)
			if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == cmd.ID {
				if f.Status == protocol.StatusRejected {
					t.Fatalf("round %d: %s %s", i, f.Status, f.Message)
				}
				break
			}
		}
		app.CloseNow()
		cli.CloseNow()
	}
	if n := unowned.Load(); n > 0 {
		t.Fatalf("apps were told of a session %d times before the relay knew its CLI", n)
	}
}
