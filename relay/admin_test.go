package relay

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// Delete: another token's delete is refused (404) and changes nothing; the
// owner's removes the session, its listing app is told at once (a session
// frame with deleted set), the list and GET /sessions no longer hold it,
// the live CLI's next envelopes and announce are answered with the deleted
// code, and nothing brings it back.
func TestDeleteSession(t *testing.T) {
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
	do := func(tok, method, path string) (int, []byte) {
		t.Helper()
		return testutil.Request(t, method, srv.URL+path, tok, nil)
	}
	cli := as("alice-token", "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: envelopes(a1, 0, 3)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 1)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	app := as("alice-token", "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	if f := recv(t, app); f.Type != protocol.FrameSessions || len(f.Sessions) != 2 {
		t.Fatalf("list %+v", f)
	}

	if code, _ := do("bob-token", http.MethodDelete, "/sessions/"+a1); code != http.StatusNotFound {
		t.Fatalf("bob's delete: %d", code)
	}
	if n, _ := st.LastSeq(context.Background(), a1); n != 3 {
		t.Fatalf("after bob's delete last seq %d", n)
	}
	if code, _ := do("alice-token", http.MethodDelete, "/sessions/not-a-uuid"); code != http.StatusBadRequest {
		t.Fatalf("bad id: %d", code)
	}
	if code, _ := do("alice-token", http.MethodDelete, "/sessions/"+a1); code != http.StatusNoContent {
		t.Fatalf("alice's delete: %d", code)
	}
	if f := recv(t, app); f.Type != protocol.FrameSession || len(f.Sessions) != 1 || f.Sessions[0].ID != a1 || !f.Sessions[0].Deleted {
		t.Fatalf("app told %+v", f)
	}
	if code, _ := do("alice-token", http.MethodDelete, "/sessions/"+a1); code != http.StatusNotFound {
		t.Fatalf("second delete: %d", code)
	}
	code, b := do("alice-token", http.MethodGet, "/sessions")
	var got sessionsAnswer
	if err := json.Unmarshal(b, &got); code != http.StatusOK || err != nil || len(got.Sessions) != 1 || got.Sessions[0].ID != s1 {
		t.Fatalf("GET /sessions: %d %s", code, b)
	}

	// The live CLI (or one restarted with an old outbox) is told.
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: envelopes(a1, 3, 5), Ref: "r1"})
	if f := recv(t, cli); f.Type != protocol.FrameError || f.Code != CodeDeleted || f.Session != a1 || f.Ref != "r1" {
		t.Fatalf("envelopes after delete %+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: a1, Info: json.RawMessage(`{"cwd":"/w"}`)})
	if f := recv(t, cli); f.Type != protocol.FrameError || f.Code != CodeDeleted {
		t.Fatalf("announce after delete %+v", f)
	}
	if n, _ := st.LastSeq(context.Background(), a1); n != 0 {
		t.Fatalf("resurrected: last seq %d", n)
	}
	if got, err := st.Read(context.Background(), a1, 0, 100); err != nil || len(got) != 0 {
		t.Fatalf("envelopes left: %d %v", len(got), err)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	if f := recv(t, app); f.Type != protocol.FrameSessions || len(f.Sessions) != 1 || f.Sessions[0].ID != s1 {
		t.Fatalf("list after delete %+v", f)
	}
}

// A deleted session cannot come back through an append that was checked
// (claimed) before the delete: the tombstone is checked in the append's
// own transaction.
func TestAppendAfterDeleteRefused(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	ctx := t.Context()
	const session = "12121212-2222-4333-8444-555555555555"
	if err := st.Claim(ctx, session, "owner"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, session, []Item{{ID: protocol.New(), Body: []byte(`{"a":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSession(ctx, "owner", session); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, session, []Item{{ID: protocol.New(), Body: []byte(`{"a":2}`)}}); !errors.Is(err, ErrDeleted) {
		t.Fatalf("append after delete: %v, want %v", err, ErrDeleted)
	}
	if rows, _ := st.Read(ctx, session, 0, 10); len(rows) != 0 {
		t.Fatalf("%d envelopes of a deleted session", len(rows))
	}
}
