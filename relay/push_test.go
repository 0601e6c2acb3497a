package relay

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/push"
	"github.com/ccrelay/ccrelay/push/pushtest"
)

// pushRelay is a relay with Web Push to a fake push service.
type pushRelay struct {
	srv *httptest.Server
	rs  *Server
	svc *pushtest.Service
}

// devices returns the subscriptions the store keeps for owner.
func (r *pushRelay) devices(t *testing.T, owner string) map[string]pushDevice {
	t.Helper()
	d, err := r.rs.store.pushDevicesOf(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startPushRelay starts a relay with notifications on; with, if given,
// changes the Server before it serves.
func startPushRelay(t *testing.T, with ...func(*Server)) *pushRelay {
	t.Helper()
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rs := NewServer(st, log, testToken)
	for _, f := range with {
		f(rs)
	}
	keys, err := push.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	wp := push.NewWebPush(keys, "mailto:ops@example.net", &http.Client{}, log) // the fake service is on loopback
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); wp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := rs.EnablePush(PushOptions{PublicKey: keys.PublicKey(), WebPush: wp, AllowHTTPEndpoints: true}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)
	return &pushRelay{srv: srv, rs: rs, svc: pushtest.New(t, keys.PublicKey())}
}

func (r *pushRelay) do(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	return r.doAs(t, testToken, method, path, body)
}

func (r *pushRelay) doAs(t *testing.T, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	return testutil.Request(t, method, r.srv.URL+path, token, b)
}

// subscribe subscribes a device (named as the fake service knows it) to
// kinds.
func (r *pushRelay) subscribe(t *testing.T, device string, kinds ...string) push.Subscription {
	t.Helper()
	sub := r.svc.Subscribe(device)
	if code, b := r.do(t, http.MethodPut, "/push/subscription", map[string]any{"device": deviceID(device), "subscription": sub, "kinds": kinds}); code != http.StatusNoContent {
		t.Fatalf("subscribe %s: %d %s", device, code, b)
	}
	return sub
}

func deviceID(name string) string { return "device-" + name + "-0123456789" }

func (r *pushRelay) dial(t *testing.T, path string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), wsURL(r.srv, path), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// script is a CLI connection writing a session.
type script struct {
	t       *testing.T
	c       *websocket.Conn
	session string
	n       int
}

func (s *script) env(turn, subagent string, ev protocol.Event) json.RawMessage {
	s.n++
	return envelopeJSON(protocol.Envelope{ID: protocol.DeriveID(s.session, fmt.Sprint("e", s.n)), Time: int64(s.n), Role: protocol.RoleAgent, Turn: turn, Subagent: subagent, Ev: ev})
}

// batch sends envelopes and waits for the ack; it returns their seqs.
func (s *script) batch(envs ...json.RawMessage) []int64 {
	s.t.Helper()
	send(s.t, s.c, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s.session, Envelopes: envs})
	f := recv(s.t, s.c)
	if f.Type != protocol.FrameAck || len(f.Acks) != len(envs) {
		s.t.Fatalf("batch: %+v", f)
	}
	var seqs []int64
	for _, a := range f.Acks {
		seqs = append(seqs, a.Seq)
	}
	return seqs
}

func (s *script) announce(info string) {
	s.t.Helper()
	send(s.t, s.c, protocol.Frame{Type: protocol.FrameAnnounce, Session: s.session, Info: json.RawMessage(info)})
	if f := recv(s.t, s.c); f.Type != protocol.FrameAck {
		s.t.Fatalf("announce: %+v", f)
	}
}

func turnEnd(status protocol.TurnStatus) protocol.Event {
	return protocol.Event{T: protocol.KindTurnEnd, Status: status}
}

type got struct {
	Sub     string
	Session string `json:"session"`
	Kind    string `json:"kind"`
	Seq     int64  `json:"seq"`
}

func decode(t *testing.T, m pushtest.Message) got {
	t.Helper()
	var g got
	dec := json.NewDecoder(bytes.NewReader(m.Payload))
	dec.DisallowUnknownFields() // session, kind, seq: nothing else
	if err := dec.Decode(&g); err != nil {
		t.Fatalf("payload %s: %v", m.Payload, err)
	}
	g.Sub = m.Sub
	return g
}

// waitPush waits for the push to the marker: messages are sent in order, so
// everything before it has been sent.
func (r *pushRelay) until(t *testing.T, marker got) []got {
	t.Helper()
	var out []got
	for {
		m, ok := r.svc.Next(10 * time.Second)
		if !ok {
			t.Fatalf("no push %+v; got %+v; service errors %v", marker, out, r.svc.Errors())
		}
		g := decode(t, m)
		out = append(out, g)
		if g == marker {
			return out
		}
	}
}

// A scripted session: a permission request, turns that end, a failure, a
// background agent. Exactly the expected pushes arrive, each once, none
// while the device shows the session but the answer to a request (which
// replaces its notification).
func TestPushScriptedSession(t *testing.T) {
	r := startPushRelay(t)
	r.subscribe(t, "phone", PushKinds...)
	r.subscribe(t, "laptop", PushPermission)
	const session = "fc141a3b-0000-4000-8000-000000000001"
	cli := &script{t: t, c: r.dial(t, "/ws/cli"), session: session}
	second := &script{t: t, c: r.dial(t, "/ws/cli"), session: session} // another connection for the same session
	turn1, turn2, turn3 := protocol.DeriveID(session, "t1"), protocol.DeriveID(session, "t2"), protocol.DeriveID(session, "t3")
	turn4, turn5 := protocol.DeriveID(session, "t4"), protocol.DeriveID(session, "t5")
	agent, fg := protocol.DeriveID(session, "a1"), protocol.DeriveID(session, "a2")

	// A permission request: both devices, once, even announced again and
	// by a second connection.
	s := cli.batch(cli.env(turn1, "", protocol.Event{T: protocol.KindTurnStart}))
	perm := `{"mode":"remote","status":"waiting-for-permission","permissions":[{"id":"toolu_01","tool":"Bash"}]}`
	cli.announce(perm)
	cli.announce(perm)
	second.announce(perm)
	var all []got
	all = append(all, r.until(t, got{"laptop", session, PushPermission, s[0]})...)

	// A foreground agent (starts and stops within the turn), a background
	// one (outlives it), the turn ends: one turn push. Sent twice by two
	// connections: stored once, pushed once.
	cli.announce(`{"mode":"remote","status":"busy"}`)
	envs := []json.RawMessage{
		cli.env(turn1, agent, protocol.Event{T: protocol.KindStart, Title: "background"}),
		cli.env(turn1, fg, protocol.Event{T: protocol.KindStart, Title: "foreground"}),
		cli.env(turn1, fg, protocol.Event{T: protocol.KindStop}),
		cli.env(turn1, "", turnEnd(protocol.StatusCompleted)),
	}
	s = cli.batch(envs...)
	second.batch(envs...)
	all = append(all, r.until(t, got{"phone", session, PushTurn, s[3]})...)

	// The phone shows the session: nothing for it, the laptop still hears
	// of permissions.
	app := r.dial(t, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameVisibility, Device: deviceID("phone"), Session: session, Visible: true})
	waitFor(t, "the phone visible", func() bool {
		r.rs.push.mu.Lock()
		defer r.rs.push.mu.Unlock()
		return r.rs.push.shownTo(OwnerID(testToken), deviceID("phone"), session)
	})
	cli.batch(cli.env(turn2, "", protocol.Event{T: protocol.KindTurnStart}), cli.env(turn2, "", turnEnd(protocol.StatusFailed)))
	s = cli.batch(cli.env(turn3, "", protocol.Event{T: protocol.KindTurnStart}))
	cli.announce(`{"mode":"remote","status":"waiting-for-permission","permissions":[{"id":"toolu_02","tool":"Edit"}]}`)
	all = append(all, r.until(t, got{"laptop", session, PushPermission, s[0]})...)
	// Answered in the app the phone shows: both hear it (the phone may
	// hold the request's notification from before).
	cli.announce(`{"mode":"remote","status":"busy"}`)
	all = append(all, r.until(t, got{"laptop", session, PushAnswered, s[0]})...)

	// Hidden again: the background agent's stop (in a later turn), a
	// failed turn and Claude's error right after it (the same event: one
	// push), a cancelled turn (no push), a completed one.
	send(t, app, protocol.Frame{Type: protocol.FrameVisibility, Device: deviceID("phone"), Session: session, Visible: false})
	waitFor(t, "the phone hidden", func() bool {
		r.rs.push.mu.Lock()
		defer r.rs.push.mu.Unlock()
		return !r.rs.push.shownTo(OwnerID(testToken), deviceID("phone"), session)
	})
	cli.announce(`{"mode":"remote","status":"busy"}`)
	cli.batch(
		cli.env(turn3, agent, protocol.Event{T: protocol.KindStop}),
		cli.env(turn3, "", turnEnd(protocol.StatusFailed)))
	cli.announce(`{"mode":"remote","status":"idle","error":"Claude stopped: exit 1"}`)
	cli.batch(cli.env(turn4, "", protocol.Event{T: protocol.KindTurnStart}), cli.env(turn4, "", turnEnd(protocol.StatusCancelled)))
	s = cli.batch(cli.env(turn5, "", protocol.Event{T: protocol.KindTurnStart}), cli.env(turn5, "", turnEnd(protocol.StatusCompleted)))
	all = append(all, r.until(t, got{"phone", session, PushTurn, s[1]})...)

	want := []got{
		{"phone", session, PushPermission, 1}, {"laptop", session, PushPermission, 1},
		// The request answered (no longer announced): both devices that
		// chose permissions hear it.
		{"phone", session, PushAnswered, 1}, {"laptop", session, PushAnswered, 1},
		{"phone", session, PushTurn, 5},
		{"laptop", session, PushPermission, 8},
		{"phone", session, PushAnswered, 8}, {"laptop", session, PushAnswered, 8},
		{"phone", session, PushAgent, 9}, {"phone", session, PushFailed, 10},
		{"phone", session, PushTurn, 14},
	}
	sortGot := func(g []got) {
		slices.SortFunc(g, func(a, b got) int {
			return strings.Compare(fmt.Sprint(a.Seq, a.Kind, a.Sub), fmt.Sprint(b.Seq, b.Kind, b.Sub))
		})
	}
	sortGot(all)
	sortGot(want)
	if !slices.Equal(all, want) {
		t.Errorf("pushes:\n got %+v\nwant %+v", all, want)
	}
	if e := r.svc.Errors(); len(e) > 0 {
		t.Errorf("the push service refused: %v", e)
	}
}

// A session whose CLI is gone for good (not back within CLIGoneAfter) has
// nothing to answer its requests: the devices notified of them hear they
// no longer wait.
func TestPushAnsweredWhenCLIGone(t *testing.T) {
	r := startPushRelay(t, func(rs *Server) { rs.Limits.CLIGoneAfter = 200 * time.Millisecond })
	r.subscribe(t, "phone", PushPermission)
	const session = "fc141a3b-0000-4000-8000-000000000002"
	cli := &script{t: t, c: r.dial(t, "/ws/cli"), session: session}
	s := cli.batch(cli.env(protocol.DeriveID(session, "t1"), "", protocol.Event{T: protocol.KindTurnStart}))
	cli.announce(`{"mode":"remote","status":"waiting-for-permission","permissions":[{"id":"toolu_01","tool":"Bash"}]}`)
	r.until(t, got{"phone", session, PushPermission, s[0]})
	cli.c.Close(websocket.StatusNormalClosure, "")
	r.until(t, got{"phone", session, PushAnswered, s[0]})
}

// A subscription its push service answers 404 or 410 for is removed.
func TestPushGoneRemovesSubscription(t *testing.T) {
	for _, code := range []int{http.StatusNotFound, http.StatusGone} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			r := startPushRelay(t)
			r.subscribe(t, "phone", PushTurn)
			r.subscribe(t, "tablet", PushTurn)
			r.svc.Answer("phone", code)
			const session = "fc141a3b-0000-4000-8000-000000000002"
			cli := &script{t: t, c: r.dial(t, "/ws/cli"), session: session}
			turn := protocol.DeriveID(session, "t")
			s := cli.batch(cli.env(turn, "", protocol.Event{T: protocol.KindTurnStart}), cli.env(turn, "", turnEnd(protocol.StatusCompleted)))
			r.until(t, got{"tablet", session, PushTurn, s[1]})
			waitFor(t, "the phone's subscription removed", func() bool {
				code, _ := r.do(t, http.MethodGet, "/push/subscription?device="+deviceID("phone"), nil)
				return code == http.StatusNotFound
			})
			if code, _ := r.do(t, http.MethodGet, "/push/subscription?device="+deviceID("tablet"), nil); code != http.StatusOK {
				t.Errorf("the tablet's subscription: %d", code)
			}
			if d := r.devices(t, OwnerID(testToken)); len(d) != 1 || d[deviceID("tablet")].Sub.Endpoint == "" {
				t.Errorf("subscriptions stored: %+v", d)
			}
		})
	}
}

func TestPushSubscriptionsKeptAndBounded(t *testing.T) {
	r := startPushRelay(t)
	fi0 := time.Now()
	r.subscribe(t, "first", PushTurn)
	for i := 1; i < MaxPushDevices; i++ {
		r.rs.now = func() time.Time { return fi0.Add(time.Duration(i) * time.Second) }
		r.subscribe(t, fmt.Sprint("d", i), PushTurn)
	}
	r.rs.now = func() time.Time { return fi0.Add(time.Hour) }
	r.subscribe(t, "one-more", PushTurn, PushFailed)
	if code, _ := r.do(t, http.MethodGet, "/push/subscription?device="+deviceID("first"), nil); code != http.StatusNotFound {
		t.Errorf("the least recent device beyond MaxPushDevices: %d, want removed", code)
	}
	code, b := r.do(t, http.MethodGet, "/push/subscription?device="+deviceID("one-more"), nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"kinds":["turn","failed"]`) {
		t.Errorf("the new device: %d %s", code, b)
	}
	// A restarted relay keeps them.
	again := NewServer(r.rs.store, nil, testToken)
	if err := again.EnablePush(PushOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(r.devices(t, OwnerID(testToken))); n != MaxPushDevices {
		t.Errorf("after a restart: %d devices, want %d", n, MaxPushDevices)
	}
	// Unsubscribing.
	r.do(t, http.MethodDelete, "/push/subscription?device="+deviceID("one-more"), nil)
	if code, _ := r.do(t, http.MethodGet, "/push/subscription?device="+deviceID("one-more"), nil); code != http.StatusNotFound {
		t.Errorf("after DELETE: %d", code)
	}
}

func TestPushSubscriptionRefused(t *testing.T) {
	r := startPushRelay(t)
	good := r.svc.Subscribe("x")
	with := func(f func(*push.Subscription)) push.Subscription { s := good; f(&s); return s }
	for _, tc := range []struct {
		name string
		body any
	}{
		{"short device id", map[string]any{"device": "abc", "subscription": good, "kinds": []string{"turn"}}},
		{"device id with a slash", map[string]any{"device": "abcdefgh/ijklmnopq", "subscription": good}},
		{"unknown kind", map[string]any{"device": deviceID("x"), "subscription": good, "kinds": []string{"content"}}},
		{"kind twice", map[string]any{"device": deviceID("x"), "subscription": good, "kinds": []string{"turn", "turn"}}},
		{"endpoint too long", map[string]any{"device": deviceID("x"), "subscription": with(func(s *push.Subscription) { s.Endpoint += "/" + strings.Repeat("a", MaxPushEndpointBytes) })}},
		{"endpoint not a URL", map[string]any{"device": deviceID("x"), "subscription": with(func(s *push.Subscription) { s.Endpoint = "file:///etc/passwd" })}},
		{"bad p256dh", map[string]any{"device": deviceID("x"), "subscription": with(func(s *push.Subscription) { s.Keys.P256dh = "AAAA" })}},
		{"bad auth", map[string]any{"device": deviceID("x"), "subscription": with(func(s *push.Subscription) { s.Keys.Auth = "" })}},
		{"body too big", map[string]any{"device": deviceID("x"), "subscription": good, "pad": strings.Repeat("p", MaxPushRequestBytes)}},
	} {
		if code, b := r.do(t, http.MethodPut, "/push/subscription", tc.body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", tc.name, code, b)
		}
	}
	// Without AllowHTTPEndpoints only https endpoints are taken.
	r.rs.push.opts.AllowHTTPEndpoints = false
	if code, b := r.do(t, http.MethodPut, "/push/subscription", map[string]any{"device": deviceID("x"), "subscription": good}); code != http.StatusBadRequest {
		t.Errorf("an http endpoint: %d %s", code, b)
	}
	// Nor https endpoints on the relay's own network (a device must not
	// make the relay post into it); a public one is taken.
	for _, host := range []string{"127.0.0.1", "localhost", "10.0.0.7:8443", "169.254.169.254", "[::1]", "[fd00::1]", "100.101.102.103", "app.localhost"} {
		sub := with(func(s *push.Subscription) { s.Endpoint = "https://" + host + "/push/x" })
		code, b := r.do(t, http.MethodPut, "/push/subscription", map[string]any{"device": deviceID("x"), "subscription": sub})
		if code != http.StatusBadRequest || !strings.Contains(string(b), "public address") {
			t.Errorf("endpoint on %s: %d %s", host, code, b)
		}
	}
	sub := with(func(s *push.Subscription) { s.Endpoint = "https://fcm.googleapis.com/fcm/send/x" })
	if code, b := r.do(t, http.MethodPut, "/push/subscription", map[string]any{"device": deviceID("x"), "subscription": sub}); code != http.StatusOK && code != http.StatusNoContent {
		t.Errorf("a public endpoint: %d %s", code, b)
	}
	// The endpoints need the token.
	res, err := http.Get(r.srv.URL + "/push/key")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/push/key without the token: %d", res.StatusCode)
	}
	code, b := r.do(t, http.MethodGet, "/push/key", nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"kinds":["permission","turn","failed","agent"]`) {
		t.Errorf("/push/key: %d %s", code, b)
	}
}

// The service worker reads a session's summary to write its notification.
func TestPushSessionSummary(t *testing.T) {
	r := startPushRelay(t)
	const session = "fc141a3b-0000-4000-8000-000000000003"
	cli := &script{t: t, c: r.dial(t, "/ws/cli"), session: session}
	cli.announce(`{"mode":"remote","status":"waiting-for-permission","title":"Fix the tests","permissions":[{"id":"toolu_01","tool":"Bash"}]}`)
	code, b := r.do(t, http.MethodGet, "/push/session?id="+session, nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"title":"Fix the tests"`) || !strings.Contains(string(b), `"id":"toolu_01"`) {
		t.Errorf("/push/session: %d %s", code, b)
	}
	if code, _ := r.do(t, http.MethodGet, "/push/session?id=fc141a3b-0000-4000-8000-000000000009", nil); code != http.StatusNotFound {
		t.Errorf("an unknown session: %d", code)
	}
	if code, _ := r.do(t, http.MethodGet, "/push/session?id=nope", nil); code != http.StatusBadRequest {
		t.Errorf("not a session id: %d", code)
	}
}

// Without EnablePush the endpoints say notifications are off.
func TestPushOff(t *testing.T) {
	srv := startRelay(t)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/push/key", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("/push/key on a relay without push: %d", res.StatusCode)
	}
}

// What the relay remembers to push each event once is bounded: the oldest
// are forgotten.
func TestPushMemoryBounded(t *testing.T) {
	var f fifoSet[struct{}]
	for i := range maxPushRecent + 10 {
		f.put(fmt.Sprint(i), struct{}{}, maxPushRecent)
	}
	if len(f.m) != maxPushRecent || len(f.order) != maxPushRecent {
		t.Fatalf("%d kept, want %d", len(f.m), maxPushRecent)
	}
	if _, ok := f.get("9"); ok {
		t.Error("an old key is still there")
	}
	if _, ok := f.get(fmt.Sprint(maxPushRecent + 9)); !ok {
		t.Error("the newest key is gone")
	}
	// A key forgotten and put again, many times over, leaves the bound
	// as it was (CLI connections' claims, nodes' read positions).
	for range 3 * maxPushRecent {
		k := fmt.Sprint(maxPushRecent + 9)
		f.forget(k)
		if _, ok := f.get(k); ok {
			t.Fatal("a forgotten key is still there")
		}
		f.put(k, struct{}{}, maxPushRecent)
	}
	if len(f.m) > maxPushRecent || len(f.order) > maxPushRecent {
		t.Fatalf("%d kept in an order of %d, want at most %d", len(f.m), len(f.order), maxPushRecent)
	}
}

// A visibility frame with a bad session or device id is refused, and the
// connection stays usable.
func TestVisibilityRefused(t *testing.T) {
	r := startPushRelay(t)
	app := r.dial(t, "/ws/app")
	for _, f := range []protocol.Frame{
		{Type: protocol.FrameVisibility, Session: "not-a-uuid", Visible: true},
		{Type: protocol.FrameVisibility, Device: "short", Visible: true},
		{Type: protocol.FrameVisibility, Device: "has/a/slash/in/it/x", Visible: true},
	} {
		send(t, app, f)
		if got := recv(t, app); got.Type != protocol.FrameError || got.Code != "bad-visibility" {
			t.Errorf("%+v: %+v", f, got)
		}
	}
	r.rs.push.mu.Lock()
	n := len(r.rs.push.visible)
	r.rs.push.mu.Unlock()
	if n != 0 {
		t.Errorf("%d visibilities recorded from refused frames", n)
	}
}

// An app connection that ends no longer counts as showing its session.
func TestVisibilityForgottenAtDisconnect(t *testing.T) {
	r := startPushRelay(t)
	const session = "fc141a3b-0000-4000-8000-000000000004"
	app := r.dial(t, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameVisibility, Device: deviceID("phone"), Session: session, Visible: true})
	shown := func() bool {
		r.rs.push.mu.Lock()
		defer r.rs.push.mu.Unlock()
		return r.rs.push.shownTo(OwnerID(testToken), deviceID("phone"), session)
	}
	waitFor(t, "the session shown", shown)
	app.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the session no longer shown", func() bool { return !shown() })
}

// A paired device's subscriptions are its own: another device of the same
// account that names its device id reads nothing, replaces nothing and
// removes nothing; revoking a device removes its subscriptions.
func TestPushSubscriptionsBoundToCredential(t *testing.T) {
	r := startPushRelay(t)
	ctx := context.Background()
	account := r.rs.tokens[testToken]
	credA, secretA, err := r.rs.store.AddCredential(ctx, account, RoleDevice, "phone A", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, secretB, err := r.rs.store.AddCredential(ctx, account, RoleDevice, "phone B", nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := deviceID("a")
	sub := r.svc.Subscribe("a")
	if code, b := r.doAs(t, secretA, http.MethodPut, "/push/subscription", map[string]any{"device": dev, "subscription": sub}); code != http.StatusNoContent {
		t.Fatalf("A subscribes: %d %s", code, b)
	}
	if code, _ := r.doAs(t, secretA, http.MethodGet, "/push/subscription?device="+dev, nil); code != http.StatusOK {
		t.Fatalf("A reads its subscription: %d", code)
	}
	if code, _ := r.doAs(t, secretB, http.MethodGet, "/push/subscription?device="+dev, nil); code != http.StatusNotFound {
		t.Fatalf("B reads A's subscription: %d", code)
	}
	other := sub
	other.Endpoint += "-b"
	if code, b := r.doAs(t, secretB, http.MethodPut, "/push/subscription", map[string]any{"device": dev, "subscription": other}); code != http.StatusNoContent {
		t.Fatalf("B subscribes: %d %s", code, b)
	}
	r.doAs(t, secretB, http.MethodDelete, "/push/subscription?device="+dev, nil)
	devs := r.devices(t, account)
	a, ok := devs[credA.ID+":"+dev]
	if !ok || a.Sub.Endpoint != sub.Endpoint || len(devs) != 1 {
		t.Fatalf("A's subscription after B's requests: %+v (%d devices)", a, len(devs))
	}
	r.rs.revoke(ctx, httptest.NewRecorder(), credA, "test")
	if n := len(r.devices(t, account)); n != 0 {
		t.Fatalf("%d subscriptions left after A was revoked", n)
	}
}

// An older relay's push.json is moved into the store at EnablePush, once:
// the file is renamed, so a subscription removed afterwards does not come
// back at the next start. Subscriptions made with another VAPID key than
// the store's (the key file beside them says so) are not imported; a file
// that is not JSON stops the start and stays.
func TestPushFileImportedOnce(t *testing.T) {
	keys, _ := push.NewKeys()
	other, _ := push.NewKeys()
	owner := OwnerID(testToken)
	file := map[string]map[string]*pushDevice{owner: {
		deviceID("phone"):  {Kinds: []string{PushTurn}, Updated: 1},
		deviceID("laptop"): {Kinds: []string{PushPermission}, Updated: 2},
	}}
	file[owner][deviceID("phone")].Sub = validSub(t, "https://push.example.net/phone")
	file[owner][deviceID("laptop")].Sub = validSub(t, "https://push.example.net/laptop")
	// Entries a device could not have subscribed with are left out: an
	// endpoint on this machine, keys that are not keys, an unknown kind.
	file[owner][deviceID("local")] = &pushDevice{Sub: validSub(t, "https://127.0.0.1/x"), Updated: 3}
	file[owner][deviceID("nokeys")] = &pushDevice{Sub: push.Subscription{Endpoint: "https://push.example.net/nokeys"}, Updated: 3}
	file[owner][deviceID("kind")] = &pushDevice{Sub: validSub(t, "https://push.example.net/kind"), Kinds: []string{"content"}, Updated: 3}
	file["someone-else"] = map[string]*pushDevice{deviceID("x"): {Sub: validSub(t, "http://push.example.net/plain"), Updated: 3}}
	legacy, _ := json.Marshal(file)
	for _, tc := range []struct {
		name    string
		body    []byte
		keyFile *push.Keys // beside push.json, as older relays kept it
		want    int        // subscriptions imported
		fails   bool
	}{
		{"no key file", legacy, nil, 2, false},
		{"the store's key file", legacy, keys, 2, false},
		{"another key", legacy, other, 0, false},
		{"not JSON", []byte("{"), nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, PushFile)
			if err := os.WriteFile(path, tc.body, 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.keyFile != nil {
				b, _ := push.MarshalKeys(tc.keyFile)
				os.WriteFile(filepath.Join(dir, push.KeyFile), b, 0o600)
			}
			st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
			start := func() error {
				return NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken).
					EnablePush(PushOptions{PublicKey: keys.PublicKey(), ImportFile: path})
			}
			err := start()
			if tc.fails {
				if _, serr := os.Stat(path); err == nil || serr != nil {
					t.Fatalf("EnablePush: %v; the file: %v", err, serr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			devs, err := st.pushDevicesOf(context.Background(), owner)
			if err != nil || len(devs) != tc.want {
				t.Fatalf("%d subscriptions imported (%v), want %d", len(devs), err, tc.want)
			}
			if tc.want > 0 && (devs[deviceID("laptop")].Sub.Endpoint != "https://push.example.net/laptop" || devs[deviceID("phone")].Kinds[0] != PushTurn) {
				t.Fatalf("imported %+v", devs)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("push.json still there: %v", err)
			}
			if _, err := os.Stat(path + ".imported"); err != nil {
				t.Fatal(err)
			}
			// Removed, then the relay starts again: it stays removed.
			st.deletePushDevice(context.Background(), owner, deviceID("phone"), nil)
			if err := start(); err != nil {
				t.Fatal(err)
			}
			if devs, _ := st.pushDevicesOf(context.Background(), owner); len(devs) != max(tc.want-1, 0) {
				t.Fatalf("after a second start: %+v", devs)
			}
		})
	}
}

// validSub is a subscription with real keys, at endpoint.
func validSub(t *testing.T, endpoint string) push.Subscription {
	t.Helper()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var sub push.Subscription
	sub.Endpoint = endpoint
	sub.Keys.P256dh = base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes())
	sub.Keys.Auth = base64.RawURLEncoding.EncodeToString(make([]byte, 16))
	return sub
}
