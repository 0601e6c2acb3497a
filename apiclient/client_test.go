package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
	"github.com/coder/websocket"
)

const token = "test-token"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func envs(session string, from, to int) []protocol.Envelope {
	var out []protocol.Envelope
	for i := from; i < to; i++ {
		out = append(out, protocol.Envelope{ID: protocol.DeriveID(session, fmt.Sprint(i)), Time: int64(i + 1), Role: protocol.RoleUser,
			Ev: protocol.Event{T: protocol.KindText, Text: fmt.Sprint(i)}})
	}
	return out
}

// relayProc is a relay that can be stopped and started again on the same
// address and database.
type relayProc struct {
	t    testing.TB
	addr string
	db   string
	srv  *http.Server
	rs   *relay.Server
	st   *relay.Store
	stop func()
}

func newRelay(t testing.TB) *relayProc {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relayProc{t: t, addr: ln.Addr().String(), db: filepath.Join(t.TempDir(), "relay.db")}
	r.serve(ln)
	t.Cleanup(r.halt)
	return r
}

func (r *relayProc) serve(ln net.Listener) {
	st, err := relay.OpenStore(r.db)
	if err != nil {
		r.t.Fatal(err)
	}
	r.st = st
	r.rs = relay.NewServer(st, quiet, token)
	base, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	r.srv = &http.Server{Handler: r.rs.Handler(), BaseContext: func(net.Listener) context.Context { return base }}
	go r.srv.Serve(ln)
}

// halt stops the relay abruptly: every connection cut, like a crash.
func (r *relayProc) halt() {
	if r.srv == nil {
		return
	}
	r.srv.Close()
	r.stop()
	r.rs.Wait()
	r.st.Close()
	r.srv = nil
}

func (r *relayProc) start() {
	var ln net.Listener
	var err error
	for range 100 { // the port may linger a moment
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.serve(ln)
}

func (r *relayProc) ids(session string) []string {
	st, err := relay.OpenStore(r.db)
	if err != nil {
		r.t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.Read(context.Background(), session, 0, 1<<20)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for i, row := range rows {
		if row.Seq != int64(i+1) {
			r.t.Fatalf("gap at %d: seq %d", i, row.Seq)
		}
		out = append(out, row.ID)
	}
	return out
}

func TestClientDeliversThroughRelayRestarts(t *testing.T) {
	r := newRelay(t)
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, BatchSize: 50, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	ctx := context.Background()
	const n = 1500
	a, b := envs(sessA, 0, n), envs(sessB, 0, n)
	for i := 0; i < n; i += 100 {
		if err := box.Append(ctx, sessA, a[i:i+100]); err != nil {
			t.Fatal(err)
		}
		if err := box.Append(ctx, sessB, b[i:i+100]); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 { // the relay dies and comes back mid-stream
			r.halt()
			r.start()
		}
	}
	rc.finish(t)
	r.halt()
	checkStored(t, sessA, r.ids(sessA), a)
	checkStored(t, sessB, r.ids(sessB), b)
}

func TestClientUnauthorized(t *testing.T) {
	r := newRelay(t)
	box, _ := OpenOutbox(t.TempDir())
	defer box.Close()
	cl := NewClient(Config{URL: "http://" + r.addr, Token: "wrong", Logger: quiet}, box)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Run(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Run = %v", err)
	}
}

// The outbox survives a restart, resumes after the acknowledged offset, cuts
// a torn last line, and compacts once everything is acknowledged.
func TestOutboxDurable(t *testing.T) {
	dir := t.TempDir()
	box, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	box.Append(ctx, "A", envs("A", 0, 3))
	box.Append(ctx, "B", envs("B", 0, 2))
	b, _ := box.next(10, MaxBatchBytes)
	if b.session != "A" || len(b.ids) != 3 {
		t.Fatalf("first batch %+v", b)
	}
	box.ack(b.end)
	box.Close()
	// A crash mid-append leaves a torn line.
	f, _ := os.OpenFile(filepath.Join(dir, logName), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"s":"B","i":"torn","e":{"id":`)
	f.Close()
	box, err = OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	b, _ = box.next(10, MaxBatchBytes)
	if b.session != "B" || len(b.ids) != 2 || b.ids[1] != envs("B", 0, 2)[1].ID {
		t.Fatalf("after reopen %+v", b)
	}
	box.ack(b.end)
	if b, _ := box.next(10, MaxBatchBytes); b != nil || box.Pending() != 0 {
		t.Fatalf("left %+v, pending %d", b, box.Pending())
	}
	// Compaction: a large, fully acknowledged log is replaced by an empty
	// one (a header line).
	big := envs("C", 0, 10000)
	box.Append(ctx, "C", big)
	for {
		b, _ := box.next(1000, MaxBatchBytes)
		if b == nil {
			break
		}
		box.ack(b.end)
	}
	if fi, _ := os.Stat(filepath.Join(dir, logName)); fi.Size() > 64 {
		t.Fatalf("log not compacted: %d bytes", fi.Size())
	}
}

// running is a Client running in the background.
type running struct {
	cl     *Client
	cancel context.CancelFunc
	done   chan error
}

func runClient(cfg Config, box *Outbox) *running {
	cfg.Logger = quiet
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cl: NewClient(cfg, box), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- r.cl.Run(ctx) }()
	return r
}

// finish waits until everything is acknowledged, then stops the client.
func (r *running) finish(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r.cancel()
	<-r.done
}

// checkStored fails unless got are exactly the ids of want, in order.
func checkStored(t *testing.T, session string, got []string, want []protocol.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("session %s: %d stored, want %d", session, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i].ID {
			t.Fatalf("session %s position %d: %s, want %s", session, i, got[i], want[i].ID)
		}
	}
}

// An announcement made after envelopes reaches the relay after them: when
// the app hears the new state, every envelope before it is stored.
func TestAnnouncementAfterEnvelopes(t *testing.T) {
	r := newRelay(t)
	const session = "5e55a001-0000-4000-8000-0000000000a1"
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	// The session exists, and an app lists sessions.
	first := runClient(Config{URL: "http://" + r.addr, Token: token}, box)
	first.cl.Announce(session, json.RawMessage(`{"status":"idle"}`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if owner, _ := r.st.OwnerOf(ctx, session); owner != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session was never announced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	first.finish(t)
	app, _, err := websocket.Dial(ctx, "ws://"+r.addr+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.CloseNow()
	b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameList})
	app.Write(ctx, websocket.MessageText, b)
	// Envelopes, then a state that refers to them.
	const n = 2000
	if err := box.Append(ctx, session, envs(session, 0, n)); err != nil {
		t.Fatal(err)
	}
	run := runClient(Config{URL: "http://" + r.addr, Token: token, BatchSize: 100}, box)
	run.cl.Announce(session, json.RawMessage(`{"status":"waiting-for-permission"}`))
	for {
		_, b, err := app.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f protocol.Frame
		json.Unmarshal(b, &f)
		if f.Type == protocol.FrameSession && strings.Contains(string(f.Sessions[0].Info), "waiting-for-permission") {
			if seq, _ := r.st.LastSeq(ctx, session); seq != n {
				t.Fatalf("the state reached the app with %d of the %d envelopes before it stored", seq, n)
			}
			break
		}
	}
	run.finish(t)
}

// Flush waits for the session's latest announcement too, not only for the
// outbox: a process that announces its last state ("stopped, and why")
// and then flushes before it exits leaves that state on the relay. While
// the relay cannot be reached, Flush says the announcement is not sent.
func TestFlushWaitsForTheLastAnnouncement(t *testing.T) {
	r := newRelay(t)
	const session = "5e55a001-0000-4000-8000-0000000000a2"
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info := func() string {
		st, err := relay.OpenStore(r.db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		list, err := st.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, si := range list {
			if si.ID == session {
				return string(si.Info)
			}
		}
		return ""
	}
	for round := range 20 {
		run := runClient(Config{URL: "http://" + r.addr, Token: token}, box)
		state := fmt.Sprintf(`{"status":"idle","error":"stopped %d"}`, round)
		run.cl.Announce(session, json.RawMessage(state))
		if err := run.cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		run.cancel()
		<-run.done
		if got := info(); !strings.Contains(got, fmt.Sprintf(`"stopped %d"`, round)) {
			t.Fatalf("round %d: after Flush the relay holds %s", round, got)
		}
	}

	r.halt()
	run := runClient(Config{URL: "http://" + r.addr, Token: token}, box)
	defer func() { run.cancel(); <-run.done }()
	run.cl.Announce(session, json.RawMessage(`{"status":"idle","error":"unsent"}`))
	fctx, fcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer fcancel()
	if err := run.cl.Flush(fctx); err == nil || !strings.Contains(err.Error(), "1 announcements") {
		t.Fatalf("Flush with the relay down and an announcement unsent: %v", err)
	}
}
