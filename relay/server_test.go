package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

const testToken = "t0ken-for-tests"

func startRelay(t *testing.T) *httptest.Server {
	t.Helper()
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	srv := httptest.NewServer(NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken).Handler())
	t.Cleanup(srv.Close)
	return srv
}

func wsURL(srv *httptest.Server, path string) string {
	return "ws" + strings.TrimPrefix(srv.URL, "http") + path
}

func dial(t *testing.T, srv *httptest.Server, path string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(srv, path), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(MaxFrameBytes)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func send(t *testing.T, c *websocket.Conn, f protocol.Frame) {
	t.Helper()
	f.V = protocol.FrameVersion
	b, _ := json.Marshal(f)
	if err := c.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, c *websocket.Conn) protocol.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f protocol.Frame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func envelopes(session string, from, to int) []json.RawMessage {
	var out []json.RawMessage
	for i := from; i < to; i++ {
		e := protocol.Envelope{ID: protocol.DeriveID(session, fmt.Sprint(i)), Time: int64(1000 + i), Role: protocol.RoleUser,
			Ev: protocol.Event{T: protocol.KindText, Text: fmt.Sprint("message ", i)}}
		b, _ := e.AppendJSON(nil)
		out = append(out, b)
	}
	return out
}

func TestAuthRefusedBeforeHandlers(t *testing.T) {
	// More refusals than the failed-login limit allows from one address:
	// that limit has its own test (TestFailedLoginsLoggedAndLimited).
	rs := NewServer(openTestStore(t, filepath.Join(t.TempDir(), "relay.db")), slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	rs.Limits.LoginFailures = 100
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name string
		mod  func(*http.Request)
	}{
		{"no token", func(*http.Request) {}},
		{"wrong token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }},
		{"token in the query", func(r *http.Request) { r.URL.RawQuery = "token=" + testToken }},
		{"token in the wrong header", func(r *http.Request) { r.Header.Set("X-Token", testToken) }},
	} {
		for _, path := range []string{"/health", "/ws/cli", "/ws/app"} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			tc.mod(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s: %d", tc.name, path, resp.StatusCode)
			}
		}
	}
	// A browser sends the token as a subprotocol and gets it echoed.
	ctx := context.Background()
	c, resp, err := websocket.Dial(ctx, wsURL(srv, "/ws/app"), &websocket.DialOptions{Subprotocols: []string{tokenProtocolPrefix + testToken}})
	if err != nil {
		t.Fatalf("subprotocol token refused: %v", err)
	}
	defer c.CloseNow()
	if resp.Header.Get("Sec-WebSocket-Protocol") != tokenProtocolPrefix+testToken {
		t.Fatalf("subprotocol not echoed: %q", resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	if _, _, err := websocket.Dial(ctx, wsURL(srv, "/ws/app"), &websocket.DialOptions{Subprotocols: []string{tokenProtocolPrefix + "wrong"}}); err == nil {
		t.Fatal("wrong subprotocol token accepted")
	}
}

func TestCLIBatchesAcksAndErrors(t *testing.T) {
	srv := startRelay(t)
	c := dial(t, srv, "/ws/cli")
	batch := envelopes(s1, 0, 3)
	send(t, c, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: batch})
	ack := recv(t, c)
	if ack.Type != protocol.FrameAck || len(ack.Acks) != 3 || ack.Acks[2].Seq != 3 {
		t.Fatalf("ack %+v", ack)
	}
	// Resent: the same numbers.
	send(t, c, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: append(batch[1:2], envelopes(s1, 3, 4)...)})
	if ack := recv(t, c); fmt.Sprint(ack.Acks) != fmt.Sprintf("[{%s 2} {%s 4}]", ack.Acks[0].ID, ack.Acks[1].ID) {
		t.Fatalf("resend ack %+v", ack.Acks)
	}
	// Malformed frames get an error frame; the connection stays usable.
	for _, bad := range []string{`not json`, `{"v":99,"type":"envelopes"}`, `{"v":1,"type":"nope"}`,
		`{"v":1,"type":"envelopes","session":"s1","envelopes":[{"id":"x","time":1,"role":"session","ev":{"t":"text","text":""}}]}`} {
		c.Write(context.Background(), websocket.MessageText, []byte(bad))
		if f := recv(t, c); f.Type != protocol.FrameError || f.Code == "" {
			t.Fatalf("%s → %+v", bad, f)
		}
	}
	send(t, c, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 4, 5)})
	if ack := recv(t, c); ack.Type != protocol.FrameAck || ack.Acks[0].Seq != 5 {
		t.Fatalf("after errors %+v", ack)
	}
	// A CLI's frame over the limit is answered with an error frame that
	// names it (its ref, its type's refusal code, its size); the
	// connection goes on.
	huge, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameEnvelopes, Ref: "r-huge", Session: s1,
		Envelopes: []json.RawMessage{json.RawMessage(`"` + strings.Repeat("x", MaxFrameBytes) + `"`)}})
	if err := c.Write(context.Background(), websocket.MessageText, huge); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, c); f.Type != protocol.FrameError || f.Ref != "r-huge" || f.Code != "bad-batch" ||
		!strings.Contains(f.Message, strconv.Itoa(len(huge))) || !strings.Contains(f.Message, "MaxFrameBytes") {
		t.Fatalf("oversized frame: %+v", f)
	}
	send(t, c, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 5, 6)})
	if ack := recv(t, c); ack.Type != protocol.FrameAck || ack.Acks[0].Seq != 6 {
		t.Fatalf("after oversize %+v", ack)
	}
	// On the app endpoint a frame over the limit closes the connection
	// with 1009, not a crash.
	app := dial(t, srv, "/ws/app")
	app.Write(context.Background(), websocket.MessageText, make([]byte, MaxFrameBytes+10))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, _, err := app.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
				t.Fatalf("oversized app frame: %v", err)
			}
			break
		}
	}
	// The relay is fine afterwards.
	c2 := dial(t, srv, "/ws/cli")
	send(t, c2, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 6, 7)})
	if ack := recv(t, c2); ack.Acks[0].Seq != 7 {
		t.Fatalf("after oversize %+v", ack)
	}
}

// An app subscribed from 0 while the session is written gets every envelope
// exactly once, in order: history first, then live, no gap, no duplicate.
func TestSubscribeWhileWriting(t *testing.T) {
	srv := startRelay(t)
	cli := dial(t, srv, "/ws/cli")
	const total = 3000
	all := envelopes(s1, 0, total)
	// Some history first.
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: all[:700]})
	recv(t, cli)
	app := dial(t, srv, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	done := make(chan error, 1)
	go func() {
		for i := 700; i < total; i += 50 {
			f := protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameEnvelopes, Session: s1, Envelopes: all[i:min(i+50, total)]}
			b, _ := json.Marshal(f)
			if err := cli.Write(context.Background(), websocket.MessageText, b); err != nil {
				done <- err
				return
			}
			if _, _, err := cli.Read(context.Background()); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var got []int64
	caughtUp := false
	for len(got) < total {
		f := recv(t, app)
		switch f.Type {
		case protocol.FrameBatch:
			for _, it := range f.Items {
				got = append(got, it.Seq)
				var e protocol.Envelope
				if err := json.Unmarshal(it.Envelope, &e); err != nil || e.ID != protocol.DeriveID(s1, fmt.Sprint(it.Seq-1)) {
					t.Fatalf("seq %d carries %s (%v)", it.Seq, e.ID, err)
				}
			}
		case protocol.FrameCaughtUp:
			caughtUp = true
		default:
			t.Fatalf("frame %+v", f)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("position %d has seq %d", i, s)
		}
	}
	if !caughtUp {
		t.Fatal("no caught-up frame")
	}
	// Subscribing again from a later point sends only what follows.
	app2 := dial(t, srv, "/ws/app")
	send(t, app2, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, After: total - 2})
	if f := recv(t, app2); f.Type != protocol.FrameBatch || len(f.Items) != 2 || f.Items[0].Seq != total-1 {
		t.Fatalf("resume from %d: %+v", total-2, f)
	}
}

// App websockets from another origin are refused (a page elsewhere cannot
// use a token it stole into a browser's storage for this relay's origin).
func TestAppOriginChecked(t *testing.T) {
	srv := startRelay(t)
	ctx := context.Background()
	hdr := http.Header{"Authorization": {"Bearer " + testToken}, "Origin": {"http://evil.example"}}
	if c, resp, err := websocket.Dial(ctx, wsURL(srv, "/ws/app"), &websocket.DialOptions{HTTPHeader: hdr}); err == nil {
		c.CloseNow()
		t.Fatal("cross-origin app websocket accepted")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin: %v %v", resp, err)
	}
	hdr.Set("Origin", srv.URL) // same origin
	c, _, err := websocket.Dial(ctx, wsURL(srv, "/ws/app"), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("same-origin app websocket refused: %v", err)
	}
	c.CloseNow()
}

// A CLI announces its session; an app lists the sessions and then sees
// changes (a new announcement, envelopes stored) as they happen.
func TestAnnounceAndList(t *testing.T) {
	srv := startRelay(t)
	cli := dial(t, srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{"cwd":"/w/p","title":"Fix the tests","mode":"local","status":"idle"}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck || f.Session != s1 {
		t.Fatalf("announce reply %+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`[1]`)})
	if f := recv(t, cli); f.Type != protocol.FrameError {
		t.Fatalf("bad info accepted: %+v", f)
	}
	app := dial(t, srv, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	f := recv(t, app)
	if f.Type != protocol.FrameSessions || len(f.Sessions) != 1 || f.Sessions[0].ID != s1 || !strings.Contains(string(f.Sessions[0].Info), "Fix the tests") {
		t.Fatalf("list %+v", f)
	}
	// Status changes and new envelopes reach the listing app.
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{"cwd":"/w/p","title":"Fix the tests","mode":"remote","status":"busy"}`)})
	recv(t, cli)
	if f := recv(t, app); f.Type != protocol.FrameSession || !strings.Contains(string(f.Sessions[0].Info), `"busy"`) {
		t.Fatalf("change %+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 2)})
	recv(t, cli)
	if f := recv(t, app); f.Type != protocol.FrameSession || f.Sessions[0].LastSeq != 2 {
		t.Fatalf("after envelopes %+v", f)
	}
}

// Commands: kept for an offline CLI (prompts) or refused with a reason
// (everything else); delivered when the CLI connects; acknowledged end to
// end; a resent command id is answered with where it stands.
func TestCommands(t *testing.T) {
	r := startTestRelay(t)
	srv := r.srv
	// The session exists (its CLI announced it once) but its CLI is offline.
	first := dial(t, srv, "/ws/cli")
	send(t, first, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	recv(t, first)
	first.Close(websocket.StatusNormalClosure, "")
	r.waitNoOwner(t)
	app := dial(t, srv, "/ws/app")
	cmd := func(id, kind string) protocol.Frame {
		return protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: id, Kind: kind, Text: "hello"}}
	}
	expectStatus := func(c *websocket.Conn, id, status string) protocol.Frame {
		t.Helper()
		f := recv(t, c)
		if f.Type != protocol.FrameStatus || f.Command == nil || f.Command.ID != id || f.Status != status {
			t.Fatalf("want %s %s, got %+v", id, status, f)
		}
		return f
	}
	send(t, app, cmd("p1", protocol.CommandPrompt))
	expectStatus(app, "p1", protocol.StatusQueued)
	send(t, app, cmd("x1", protocol.CommandPermission))
	if f := expectStatus(app, "x1", protocol.StatusRejected); !strings.Contains(f.Message, "no CLI") {
		t.Fatalf("no reason: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "b1", Kind: "fly"}})
	if f := recv(t, app); f.Type != protocol.FrameError {
		t.Fatalf("unknown kind accepted: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: nope, Command: &protocol.Command{ID: "n1", Kind: protocol.CommandPrompt}})
	if f := recv(t, app); f.Type != protocol.FrameError || f.Code != "not-found" {
		t.Fatalf("command for an unknown session: %+v", f)
	}

	// The CLI connects and claims the session: the queued prompt arrives.
	cli := dial(t, srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Ref: "r1", Session: s1, Info: json.RawMessage(`{"status":"idle"}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck || f.Ref != "r1" {
		t.Fatalf("announce reply %+v", f)
	}
	if f := recv(t, cli); f.Type != protocol.FrameCommand || f.Command.ID != "p1" || f.Command.Text != "hello" {
		t.Fatalf("queued prompt not delivered: %+v", f)
	}
	expectStatus(app, "p1", protocol.StatusDelivered)
	send(t, cli, protocol.Frame{Type: protocol.FrameResult, Ref: "r2", Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusDone})
	if f := recv(t, cli); f.Type != protocol.FrameAck || f.Ref != "r2" {
		t.Fatalf("result reply %+v", f)
	}
	expectStatus(app, "p1", protocol.StatusDone)

	// With the CLI online, a command goes straight through.
	send(t, app, cmd("a1", protocol.CommandAbort))
	if f := recv(t, cli); f.Type != protocol.FrameCommand || f.Command.ID != "a1" {
		t.Fatalf("live command %+v", f)
	}
	expectStatus(app, "a1", protocol.StatusDelivered)
	send(t, cli, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "a1"}, Status: protocol.StatusRejected, Message: "nothing to abort"})
	recv(t, cli)
	if f := expectStatus(app, "a1", protocol.StatusRejected); f.Message != "nothing to abort" {
		t.Fatalf("reason lost: %+v", f)
	}
	// A resent id: where it stands, not a second delivery.
	send(t, app, cmd("p1", protocol.CommandPrompt))
	expectStatus(app, "p1", protocol.StatusDone)
}

// Live frames (token deltas) reach the subscribed apps and are not stored.
func TestLiveFramesNotStored(t *testing.T) {
	srv := startRelay(t)
	cli := dial(t, srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 1)})
	recv(t, cli)
	app := dial(t, srv, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	if f := recv(t, app); f.Type != protocol.FrameBatch {
		t.Fatalf("%+v", f)
	}
	if f := recv(t, app); f.Type != protocol.FrameCaughtUp {
		t.Fatalf("%+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameLive, Session: s1, Payload: json.RawMessage(`{"delta":"Hel"}`)})
	if f := recv(t, app); f.Type != protocol.FrameLive || string(f.Payload) != `{"delta":"Hel"}` {
		t.Fatalf("%+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameLive, Session: s1, Payload: json.RawMessage(`"not an object"`)})
	if f := recv(t, cli); f.Type != protocol.FrameError {
		t.Fatalf("%+v", f)
	}
	// The next stored envelope follows seq 1: the live frame took no number.
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 1, 2)})
	if f := recv(t, cli); f.Acks[0].Seq != 2 {
		t.Fatalf("%+v", f)
	}
	if f := recv(t, app); f.Type != protocol.FrameBatch || f.Items[0].Seq != 2 {
		t.Fatalf("%+v", f)
	}
}

// Several tokens: each sees and steers only its own sessions.
func TestTokensIsolateSessions(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	srv := httptest.NewServer(NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), "alice-token", "bob-token").Handler())
	defer srv.Close()
	as := func(tok, path string) *websocket.Conn {
		c, _, err := websocket.Dial(context.Background(), wsURL(srv, path), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	alice := as("alice-token", "/ws/cli")
	send(t, alice, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: envelopes(a1, 0, 2)})
	if f := recv(t, alice); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	// Bob's CLI cannot write into Alice's session.
	bobCLI := as("bob-token", "/ws/cli")
	send(t, bobCLI, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: envelopes(a1, 5, 6)})
	if f := recv(t, bobCLI); f.Type != protocol.FrameError || f.Code != "forbidden" {
		t.Fatalf("%+v", f)
	}
	// Bob's app does not see it, cannot follow it, cannot command it.
	bob := as("bob-token", "/ws/app")
	send(t, bob, protocol.Frame{Type: protocol.FrameList})
	if f := recv(t, bob); f.Type != protocol.FrameSessions || len(f.Sessions) != 0 {
		t.Fatalf("bob lists %+v", f)
	}
	send(t, bob, protocol.Frame{Type: protocol.FrameSubscribe, Session: a1})
	if f := recv(t, bob); f.Type != protocol.FrameError || f.Code != "not-found" {
		t.Fatalf("bob subscribes %+v", f)
	}
	send(t, bob, protocol.Frame{Type: protocol.FrameCommand, Session: a1, Command: &protocol.Command{ID: "xx", Kind: protocol.CommandAbort}})
	if f := recv(t, bob); f.Type != protocol.FrameError || f.Code != "not-found" {
		t.Fatalf("bob commands %+v", f)
	}
	// Alice's app does.
	aliceApp := as("alice-token", "/ws/app")
	send(t, aliceApp, protocol.Frame{Type: protocol.FrameList})
	if f := recv(t, aliceApp); len(f.Sessions) != 1 || f.Sessions[0].ID != a1 || f.Sessions[0].LastSeq != 2 {
		t.Fatalf("alice lists %+v", f)
	}
}

// A prompt delivered to a CLI that goes away unanswered returns to the
// queue and reaches the next CLI of the session.
// A command handed to a CLI that leaves without answering stays delivered
// (never goes back to queued) and is handed to the session's next CLI,
// which answers it once; any command it did not answer, prompt or not.
func TestUnansweredCommandRedelivered(t *testing.T) {
	srv := startRelay(t)
	cli1 := dial(t, srv, "/ws/cli")
	send(t, cli1, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	recv(t, cli1)
	app := dial(t, srv, "/ws/app")
	for _, c := range []protocol.Command{{ID: "p1", Kind: protocol.CommandPrompt, Text: "go"}, {ID: "m1", Kind: protocol.CommandModel, Model: "opus"}} {
		send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &c})
		if f := recv(t, cli1); f.Type != protocol.FrameCommand || f.Command.ID != c.ID {
			t.Fatalf("%+v %+v", f, f.Command)
		}
		if f := recv(t, app); f.Status != protocol.StatusDelivered {
			t.Fatalf("%+v", f)
		}
	}
	cli1.Close(websocket.StatusNormalClosure, "") // gone without answering
	cli2 := dial(t, srv, "/ws/cli")
	send(t, cli2, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	recv(t, cli2)
	for _, id := range []string{"p1", "m1"} {
		if f := recv(t, cli2); f.Type != protocol.FrameCommand || f.Command.ID != id {
			t.Fatalf("not delivered again: %+v", f)
		}
	}
	send(t, cli2, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusDone})
	if f := recv(t, cli2); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	// The app heard nothing between delivered and done: no step back.
	if f := recv(t, app); f.Command.ID != "p1" || f.Status != protocol.StatusDone {
		t.Fatalf("%+v", f)
	}
	// The same result again (its ack was lost) is acknowledged; another
	// one is refused.
	send(t, cli2, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusDone})
	if f := recv(t, cli2); f.Type != protocol.FrameAck {
		t.Fatalf("a repeated result: %+v", f)
	}
	send(t, cli2, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected})
	if f := recv(t, cli2); f.Type != protocol.FrameError || f.Code != "not-delivered" {
		t.Fatalf("another result: %+v", f)
	}
}

// batchFrame writes what json.Marshal of the frame would.
func TestBatchFrameEncoding(t *testing.T) {
	for _, rows := range [][]Stored{
		{{Seq: 1, Body: json.RawMessage(`{"id":"ca","ev":{"t":"text","text":"a\u003cb \"q\""}}`)}},
		{{Seq: 7, Body: json.RawMessage(`{"id":"cb"}`)}, {Seq: 8, Body: json.RawMessage(`{"id":"cc","n":[1,2]}`)}},
	} {
		for _, session := range []string{"fc141a3b-0000", `odd"<session>`} {
			f := protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameBatch, Session: session}
			for _, r := range rows {
				f.Items = append(f.Items, protocol.Item{Seq: r.Seq, Envelope: r.Body})
			}
			want, _ := json.Marshal(f)
			if got := batchFrame(session, rows); string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		}
	}
}
