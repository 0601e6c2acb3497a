package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/internal/pgtest"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/push"
	"github.com/ccrelay/ccrelay/push/pushtest"
)

// startNode starts a relay node on the PostgreSQL database at url, with
// its link to the other nodes, until the test ends.
func startNode(t testing.TB, url string) *testRelay {
	t.Helper()
	return startNodeWith(t, url, nil)
}

// startNodeWith is startNode with configure (when not nil) run on the
// relay before it serves.
func startNodeWith(t testing.TB, url string, configure func(*Server)) *testRelay {
	t.Helper()
	st, err := OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	buf := &testutil.SyncBuffer{}
	rs := NewServer(st, slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), testToken)
	if configure != nil {
		configure(rs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rs.RunFanout(ctx) }()
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(func() { srv.Close(); cancel(); <-done; st.Close() })
	select {
	case <-rs.fan.connected:
	case <-time.After(20 * time.Second):
		t.Fatal("the node never listened")
	}
	return &testRelay{srv: srv, relay: rs, store: st, log: buf}
}

// envs makes n envelopes of a session from index from.
func envs(from, n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range n {
		out[i] = json.RawMessage(fmt.Sprintf(`{"id":"c%06d","time":1,"role":"agent","turn":"t1","ev":{"t":"text","text":"line %d"}}`, from+i, from+i))
	}
	return out
}

// Two relays on one PostgreSQL: an app on node B sees, live and in order,
// what a CLI on node A stores, also across a cut of node B's listening
// connection; the list on B hears of A's announcements; a prompt and a
// permission answer sent on B reach the CLI on A, and its answers reach
// the app on B; a small live frame crosses; with no CLI anywhere a
// permission answer is rejected.
func TestNodesShareOnePostgres(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startNode(t, url), startNode(t, url)
	const session = "5e5e5e5e-1111-4111-8111-111111111111"

	cli := a.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Ref: "a1", Info: json.RawMessage(`{"title":"on node A","status":"idle"}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("announce: %+v", f)
	}
	app := b.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	if f := recvType(t, app, protocol.FrameSessions); len(f.Sessions) != 1 || f.Sessions[0].ID != session {
		t.Fatalf("list on B: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	recvType(t, app, protocol.FrameCaughtUp)

	// got reads the app's batches until it has n envelopes, checking order.
	next := 1
	got := func(n int) {
		t.Helper()
		for next <= n {
			f := recvType(t, app, protocol.FrameBatch)
			for _, it := range f.Items {
				if it.Seq != int64(next) {
					t.Fatalf("envelope seq %d on B, want %d", it.Seq, next)
				}
				next++
			}
		}
	}
	stored := 0
	store := func(n int) {
		t.Helper()
		send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: session, Ref: "e", Envelopes: envs(stored, n)})
		if f := recvType(t, cli, protocol.FrameAck); len(f.Acks) != n {
			t.Fatalf("ack: %+v", f)
		}
		stored += n
	}
	store(3)
	got(3)

	// An announcement on A reaches B's list.
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Ref: "a2", Info: json.RawMessage(`{"title":"renamed on A","status":"busy"}`)})
	recvType(t, cli, protocol.FrameAck)
	for {
		f := recvType(t, app, protocol.FrameSession, protocol.FrameBatch)
		if f.Type == protocol.FrameSession && len(f.Sessions) == 1 && containsJSON(f.Sessions[0].Info, `"renamed on A"`) {
			break
		}
	}

	// B's listening connection is cut: envelopes stored meanwhile arrive
	// all the same, in order, once it is back.
	var cut int
	if err := b.store.w.QueryRowContext(context.Background(), `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = 'LISTEN ccrelay'`).Scan(&cut); err != nil || cut != 2 {
		t.Fatalf("cut %d listening connections (%v), want both nodes'", cut, err)
	}
	for range 5 {
		store(20)
	}
	got(stored)

	// A prompt sent on B reaches the CLI on A; its answer reaches B.
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "from B"}})
	f := recvType(t, cli, protocol.FrameCommand)
	if f.Command.ID != "p1" || f.Command.Text != "from B" {
		t.Fatalf("the CLI got %+v", f.Command)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameResult, Ref: "r1", Session: session, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusDone})
	recvType(t, cli, protocol.FrameAck)
	waitStatus(t, app, "p1", protocol.StatusDone)

	// A permission answer (not queued) is taken on B: A holds the CLI.
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: "q1", Kind: protocol.CommandPermission, RequestID: "r1", Allow: true}})
	if f := recvType(t, cli, protocol.FrameCommand); f.Command.ID != "q1" {
		t.Fatalf("the CLI got %+v", f.Command)
	}
	// Its rejection, with a message the machine sealed, reaches B with the
	// sealed message as the CLI sent it.
	sealedMsg := strings.Repeat("A", 40)
	send(t, cli, protocol.Frame{Type: protocol.FrameResult, Ref: "r2", Session: session, Command: &protocol.Command{ID: "q1"}, Status: protocol.StatusRejected,
		Message: protocol.SealedResultMessage, SealedMessage: sealedMsg})
	recvType(t, cli, protocol.FrameAck)
	for {
		f := recvType(t, app, protocol.FrameStatus)
		if f.Command != nil && f.Command.ID == "q1" && f.Status == protocol.StatusRejected {
			if f.SealedMessage != sealedMsg || f.Message != protocol.SealedResultMessage {
				t.Fatalf("the rejection on B: %q, %q", f.Message, f.SealedMessage)
			}
			break
		}
	}

	// A small live frame crosses.
	send(t, cli, protocol.Frame{Type: protocol.FrameLive, Session: session, Payload: json.RawMessage(`{"delta":"hel"}`)})
	if f := recvType(t, app, protocol.FrameLive); !containsJSON(f.Payload, `"hel"`) {
		t.Fatalf("live on B: %s", f.Payload)
	}

	// The CLI leaves: a permission answer is rejected, not queued.
	cli.Close(websocket.StatusNormalClosure, "")
	a.waitNoOwner(t)
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: "q2", Kind: protocol.CommandPermission, RequestID: "r2", Allow: true}})
	waitStatus(t, app, "q2", protocol.StatusRejected)
}

// Apps on node B that follow a session a CLI on node A writes to get each
// batch from one read of B's, not one read each.
func TestNodesReadOncePerBatch(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startNode(t, url), startNode(t, url)
	const session = "5e5e5e5e-2222-4222-8222-222222222222"
	cli := a.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Ref: "a1", Info: json.RawMessage(`{}`)})
	recvType(t, cli, protocol.FrameAck)
	const apps, batches, per = 8, 30, 5
	var conns []*websocket.Conn
	for range apps {
		app := b.dial(t, testToken, "/ws/app")
		send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
		recvType(t, app, protocol.FrameCaughtUp)
		conns = append(conns, app)
	}
	before := b.store.reads.Load()
	for i := range batches {
		send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: session, Ref: "e", Envelopes: envs(i*per, per)})
		recvType(t, cli, protocol.FrameAck)
	}
	for n, app := range conns {
		next := int64(1)
		for next <= batches*per {
			for _, it := range recvType(t, app, protocol.FrameBatch).Items {
				if it.Seq != next {
					t.Fatalf("app %d: envelope %d, want %d", n, it.Seq, next)
				}
				next++
			}
		}
	}
	// The first batch wakes the apps (each reads from where it stands);
	// then B reads each batch once for all of them.
	if reads := b.store.reads.Load() - before; reads > apps+batches+apps {
		t.Fatalf("B read the store %d times for %d batches to %d apps, want at most %d", reads, batches, apps, apps+batches+apps)
	}
}

func containsJSON(raw json.RawMessage, s string) bool {
	return json.Valid(raw) && strings.Contains(string(raw), s)
}

// waitStatus reads the app's frames until command id reaches status.
func waitStatus(t *testing.T, app *websocket.Conn, id, status string) {
	t.Helper()
	for {
		f := recvType(t, app, protocol.FrameStatus)
		if f.Command != nil && f.Command.ID == id && f.Status == status {
			return
		}
	}
}

// A pairing code asked for through node A is redeemed through node B (a
// load balancer sends the phone anywhere); the credential it makes works
// on A; A's machine reads the result; the code is spent on every node.
func TestNodesPairAcross(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startNode(t, url), startNode(t, url)
	call := func(base, method, path, auth string, in any) (int, map[string]any) {
		t.Helper()
		body, _ := json.Marshal(in)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, out := call(a.srv.URL, "POST", "/api/pair", testToken, map[string]any{"role": "device"})
	if code != http.StatusOK {
		t.Fatalf("pair on A: %d %v", code, out)
	}
	pairCode, _ := out["code"].(string)
	if code, out := call(a.srv.URL, "GET", "/api/pair/result?code="+pairCode, testToken, nil); code != http.StatusAccepted {
		t.Fatalf("result before redeeming: %d %v", code, out)
	}
	code, red := call(b.srv.URL, "POST", "/api/pair/redeem", "", map[string]any{"code": pairCode, "name": "phone"})
	if code != http.StatusOK {
		t.Fatalf("redeem on B: %d %v", code, red)
	}
	cred, _ := red["credential"].(string)
	app := a.dial(t, cred, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	recvType(t, app, protocol.FrameSessions)
	if code, out := call(a.srv.URL, "GET", "/api/pair/result?code="+pairCode, testToken, nil); code != http.StatusOK || out["name"] != "phone" {
		t.Fatalf("result on A: %d %v", code, out)
	}
	if code, _ := call(a.srv.URL, "POST", "/api/pair/redeem", "", map[string]any{"code": pairCode, "name": "again"}); code != http.StatusForbidden {
		t.Fatalf("a spent code redeemed again on A: %d", code)
	}
}

// countingPusher is a node's Web Push sender that counts what it is
// handed, to tell which node sent.
type countingPusher struct {
	webPusher
	sent atomic.Int64
}

func (c *countingPusher) Send(sub push.Subscription, payload []byte, urgency string, ttl time.Duration, onGone func()) error {
	c.sent.Add(1)
	return c.webPusher.Send(sub, payload, urgency, ttl, onGone)
}

// enableNodePush turns on a node's notifications as serve does: the VAPID
// keys from the store (the node's own empty data folder), a Web Push
// sender running until the test ends.
func enableNodePush(t *testing.T, n *testRelay) *countingPusher {
	t.Helper()
	keys, err := n.store.PushKeys(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	wp := push.NewWebPush(keys, "mailto:ops@example.net", &http.Client{}, log) // the fake service is on loopback
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); wp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c := &countingPusher{webPusher: wp}
	if err := n.relay.EnablePush(PushOptions{PublicKey: keys.PublicKey(), WebPush: c, AllowHTTPEndpoints: true}); err != nil {
		t.Fatal(err)
	}
	return c
}

// Notifications across two relays on one PostgreSQL: both give apps the
// same VAPID key; a device subscribes through node B, the CLI is on node
// A: A pushes to it (signed with the shared key), B sends nothing; while
// an app on B shows the session, A pushes nothing to that device, and
// again once it is hidden or closed; a subscription removed through A is
// gone on B.
func TestNodesPushAcross(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startNode(t, url), startNode(t, url)
	sentA, sentB := enableNodePush(t, a), enableNodePush(t, b)
	keyOf := func(n *testRelay) string {
		t.Helper()
		r := &pushRelay{srv: n.srv}
		code, body := r.do(t, http.MethodGet, "/push/key", nil)
		var k struct{ PublicKey string }
		if code != http.StatusOK || json.Unmarshal(body, &k) != nil || k.PublicKey == "" {
			t.Fatalf("/push/key: %d %s", code, body)
		}
		return k.PublicKey
	}
	key := keyOf(b)
	if other := keyOf(a); other != key {
		t.Fatalf("the nodes give apps different VAPID keys: %s, %s", key, other)
	}
	svc := pushtest.New(t, key)
	onA, onB := &pushRelay{srv: a.srv, rs: a.relay, svc: svc}, &pushRelay{srv: b.srv, rs: b.relay, svc: svc}
	onB.subscribe(t, "phone", PushKinds...)

	const session = "5e5e5e5e-2222-4222-8222-222222222222"
	cli := &script{t: t, c: a.dial(t, testToken, "/ws/cli"), session: session}
	turn := func(name string, status protocol.TurnStatus) int64 {
		id := protocol.DeriveID(session, name)
		return cli.batch(cli.env(id, "", protocol.Event{T: protocol.KindTurnStart}), cli.env(id, "", turnEnd(status)))[1]
	}
	s := turn("t1", protocol.StatusCompleted)
	if got := onA.until(t, got{"phone", session, PushTurn, s}); len(got) != 1 {
		t.Fatalf("pushes: %+v, want one", got)
	}
	if n, m := sentA.sent.Load(), sentB.sent.Load(); n != 1 || m != 0 {
		t.Fatalf("node A sent %d, node B %d; want 1 and 0", n, m)
	}

	// An app on B shows the session on the phone: A pushes nothing to it.
	owner := OwnerID(testToken)
	shownOnB := func() bool {
		d, err := a.store.visibleDevices(context.Background(), owner, session, time.Now().Add(-presenceStale))
		return err == nil && d[deviceID("phone")]
	}
	app := b.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameVisibility, Device: deviceID("phone"), Session: session, Visible: true})
	waitFor(t, "the phone shown on B, in the store", shownOnB)
	turn("t2", protocol.StatusCompleted)
	turn("t3", protocol.StatusFailed)
	send(t, app, protocol.Frame{Type: protocol.FrameVisibility, Device: deviceID("phone"), Session: session, Visible: false})
	waitFor(t, "the phone hidden on B, in the store", func() bool { return !shownOnB() })
	s = turn("t4", protocol.StatusCompleted)
	if got := onA.until(t, got{"phone", session, PushTurn, s}); len(got) != 1 {
		t.Fatalf("pushes after the session was shown, then hidden: %+v, want the last turn's alone", got)
	}

	// Shown again, then the app closes: its row goes with it.
	send(t, app, protocol.Frame{Type: protocol.FrameVisibility, Device: deviceID("phone"), Session: session, Visible: true})
	waitFor(t, "the phone shown on B again", shownOnB)
	app.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the closed app's row removed", func() bool { return !shownOnB() })
	s = turn("t5", protocol.StatusCompleted)
	if got := onA.until(t, got{"phone", session, PushTurn, s}); len(got) != 1 {
		t.Fatalf("pushes after the app closed: %+v", got)
	}
	if n, m := sentA.sent.Load(), sentB.sent.Load(); n != 3 || m != 0 {
		t.Fatalf("node A sent %d, node B %d; want 3 and 0", n, m)
	}
	if e := svc.Errors(); len(e) > 0 {
		t.Fatalf("the push service refused: %v", e)
	}

	// Removed through A: gone on B.
	if code, _ := onA.do(t, http.MethodDelete, "/push/subscription?device="+deviceID("phone"), nil); code != http.StatusNoContent {
		t.Fatalf("DELETE on A: %d", code)
	}
	if code, _ := onB.do(t, http.MethodGet, "/push/subscription?device="+deviceID("phone"), nil); code != http.StatusNotFound {
		t.Fatalf("the subscription on B after A removed it: %d", code)
	}
}
