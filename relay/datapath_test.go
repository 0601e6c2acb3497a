package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// Session ids of the tests: UUIDs, as Claude Code makes them.
const (
	s1   = "5e55a001-0000-4000-8000-000000000001"
	s2   = "5e55a001-0000-4000-8000-000000000002"
	a1   = "a11ce001-0000-4000-8000-000000000001"
	nope = "0b0e0b0e-0000-4000-8000-000000000000"
)

// testRelay is a relay over a store the test can reach, logging into a
// buffer.
type testRelay struct {
	srv   *httptest.Server
	relay *Server
	store *Store
	log   *testutil.SyncBuffer
}

func startTestRelay(t testing.TB, tokens ...string) *testRelay {
	t.Helper()
	if len(tokens) == 0 {
		tokens = []string{testToken}
	}
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	buf := &testutil.SyncBuffer{}
	rs := NewServer(st, slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), tokens...)
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)
	return &testRelay{srv: srv, relay: rs, store: st, log: buf}
}

// waitNoOwner waits until the relay has let every closed CLI go: a command
// sent before that is handed to the leaving CLI (and stays delivered).
func (r *testRelay) waitNoOwner(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		r.relay.peersMu.Lock()
		owned := len(r.relay.owners)
		r.relay.peersMu.Unlock()
		if owned == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay still holds a closed CLI as an owner")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *testRelay) dial(t *testing.T, token, path string) *websocket.Conn {
	t.Helper()
	return r.dialTB(t, token, path)
}

func (r *testRelay) dialTB(t testing.TB, token, path string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(r.srv, path), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(MaxFrameBytes)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func sendRaw(t *testing.T, c *websocket.Conn, b []byte) {
	t.Helper()
	if err := c.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func frameJSON(f protocol.Frame) []byte {
	f.V = protocol.FrameVersion
	b, _ := json.Marshal(f)
	return b
}

// withInvalidUTF8 puts the byte 0xff into the first string value "XX" of b.
func withInvalidUTF8(b []byte) []byte {
	return []byte(strings.Replace(string(b), "XX", "X\xffX", 1))
}

func envelopeJSON(e protocol.Envelope) json.RawMessage {
	b, err := e.AppendJSON(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func textEnvelope(id, text string) protocol.Envelope {
	return protocol.Envelope{ID: id, Time: 1000, Role: protocol.RoleUser, Ev: protocol.Event{T: protocol.KindText, Text: text}}
}

func sessionCount(t *testing.T, st *Store) int {
	t.Helper()
	all, err := st.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

// A frame the relay refuses (invalid UTF-8 anywhere, ids of the wrong form,
// negative times, fields over their limits) gets an error frame that says
// why, and leaves nothing behind: no envelope, no session, nothing sent to
// the apps.
func TestRefusedCLIFramesLeaveNothing(t *testing.T) {
	r := startTestRelay(t)
	// An app follows a session that exists, to see nothing arrives.
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 1)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	app := r.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	recv(t, app) // batch
	if f := recv(t, app); f.Type != protocol.FrameCaughtUp {
		t.Fatalf("%+v", f)
	}
	big := strings.Repeat("x", 7<<20)
	perms := make([]json.RawMessage, protocol.MaxInfoPermissions+1)
	for i := range perms {
		perms[i] = json.RawMessage(`{"id":"r` + fmt.Sprint(i) + `","tool":"Bash"}`)
	}
	manyPerms, _ := json.Marshal(map[string]any{"permissions": perms})
	env := func(mod func(*protocol.Envelope)) []json.RawMessage {
		e := textEnvelope(protocol.DeriveID("new"), "hello XX")
		mod(&e)
		return []json.RawMessage{envelopeJSON(e)}
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		code  string
		says  string
	}{
		{"envelope with invalid UTF-8", withInvalidUTF8(frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: env(func(*protocol.Envelope) {})})), "bad-batch", "UTF-8"},
		{"envelope invalid UTF-8 in s1", withInvalidUTF8(frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: env(func(*protocol.Envelope) {})})), "bad-batch", "UTF-8"},
		{"announce with invalid UTF-8", withInvalidUTF8(frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"title":"XX"}`)})), "bad-announce", "UTF-8"},
		{"live with invalid UTF-8", withInvalidUTF8(frameJSON(protocol.Frame{Type: protocol.FrameLive, Session: s1, Payload: json.RawMessage(`{"text":"XX"}`)})), "bad-live", "UTF-8"},
		{"result with invalid UTF-8", withInvalidUTF8(frameJSON(protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected, Message: "XX"})), "bad-result", "UTF-8"},
		{"session id not a UUID", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: "s1", Envelopes: envelopes("s1", 0, 1)}), "bad-batch", "not a UUID"},
		{"session id a flag", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: "--dangerously-skip-permissions", Info: json.RawMessage(`{}`)}), "bad-announce", "not a UUID"},
		{"uppercase session id", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: strings.ToUpper(s2), Envelopes: envelopes(s2, 0, 1)}), "bad-batch", "not a UUID"},
		{"envelope id not a cuid2", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: env(func(e *protocol.Envelope) { e.ID = "Bad-Id" })}), "bad-envelope", "not a cuid2"},
		{"turn not a cuid2", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: env(func(e *protocol.Envelope) { e.Role = protocol.RoleAgent; e.Turn = "turn-1" })}), "bad-envelope", "not a cuid2"},
		{"subagent not a cuid2", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: env(func(e *protocol.Envelope) { e.Subagent = "toolu_01" })}), "bad-envelope", "not a cuid2"},
		{"negative time", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: env(func(e *protocol.Envelope) { e.Time = -5 })}), "bad-envelope", "negative time"},
		{"envelope over its limit", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: env(func(e *protocol.Envelope) { e.Ev.Text = big[:protocol.MaxEnvelopeBytes] })}), "bad-envelope", "more than"},
		{"batch of a valid session with one bad envelope", frameJSON(protocol.Frame{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: append(envelopes(s2, 0, 1), json.RawMessage(`{"id":"cx","time":1,"role":"session","ev":{"t":"text","text":""}}`))}), "bad-envelope", "envelope 1"},
		{"info not an object", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`[1]`)}), "bad-announce", "JSON object"},
		{"7 MB info", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"extra":{"x":"` + big + `"}}`)}), "bad-announce", "more than"},
		{"title over its limit", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"title":"` + big[:protocol.MaxInfoStringBytes+1] + `"}`)}), "bad-announce", `"title"`},
		{"too many permission requests", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: manyPerms}), "bad-announce", "permission requests"},
		{"sealed info not base64url", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"mode":"remote","sealed":"` + strings.Repeat("A", 40) + `!!!!"}`)}), "bad-announce", "base64url"},
		{"sealed info padded", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"sealed":"` + strings.Repeat("A", 42) + `=="}`)}), "bad-announce", "base64url"},
		{"sealed info with trailing bits set", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"sealed":"` + strings.Repeat("A", 38) + `B"}`)}), "bad-announce", "base64url"},
		{"sealed info of an impossible length", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"sealed":"` + strings.Repeat("A", 41) + `"}`)}), "bad-announce", "base64url"},
		{"sealed info too short", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"sealed":"AAAA"}`)}), "bad-announce", "4 characters"},
		{"sealed info empty", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"sealed":""}`)}), "bad-announce", "0 characters"},
		{"sealed info not a string", frameJSON(protocol.Frame{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{"sealed":{"a":1}}`)}), "bad-announce", "must be a string"},
		{"live payload over its limit", frameJSON(protocol.Frame{Type: protocol.FrameLive, Session: s1, Payload: json.RawMessage(`{"text":"` + big[:protocol.MaxLiveBytes] + `"}`)}), "bad-live", "more than"},
		{"result message over its limit", frameJSON(protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected, Message: big[:protocol.MaxResultMessageBytes+1]}), "bad-result", "more than"},
		{"result for a command id not a cuid2", frameJSON(protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "P-1"}, Status: protocol.StatusDone}), "bad-result", "cuid2"},
		{"result sealedMessage not base64url", frameJSON(protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected, SealedMessage: strings.Repeat("A", 40) + "!!!!"}), "bad-result", "base64url"},
		{"result sealedMessage with trailing bits set", frameJSON(protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected, SealedMessage: strings.Repeat("A", 38) + "B"}), "bad-result", "base64url"},
		{"result sealedMessage too short", frameJSON(protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected, SealedMessage: "AAAA"}), "bad-result", "4 characters"},
		{"result sealedMessage over its limit", frameJSON(protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "p1"}, Status: protocol.StatusRejected, SealedMessage: strings.Repeat("A", protocol.MaxSealedResultChars+1)}), "bad-result", "characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sendRaw(t, cli, tc.frame)
			f := recv(t, cli)
			if f.Type != protocol.FrameError || f.Code != tc.code || !strings.Contains(f.Message, tc.says) {
				t.Fatalf("got %s %q, want %s saying %q", f.Code, f.Message, tc.code, tc.says)
			}
		})
	}
	if n := sessionCount(t, r.store); n != 1 {
		t.Fatalf("%d sessions stored, want 1: a refused frame made one", n)
	}
	if rows, _ := r.store.Read(context.Background(), s1, 0, 10); len(rows) != 1 {
		t.Fatalf("%d envelopes in %s, want 1", len(rows), s1)
	}
	// The app got nothing: the next thing it sees is the next envelope.
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 1, 2)})
	recv(t, cli)
	if f := recv(t, app); f.Type != protocol.FrameBatch || f.Items[0].Seq != 2 {
		t.Fatalf("the app saw %+v", f)
	}
}

// A sealed summary of any size a CLI seals (a summary up to
// protocol.MaxSummaryBytes, up to protocol.MaxSealedInfoChars sealed) is
// taken, longer than other info strings may be; one byte more is refused.
func TestSealedInfoSizes(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	for _, tc := range []struct {
		name  string
		bytes int
		want  string
	}{
		{"smallest", protocol.SealOverhead, protocol.FrameAck},
		{"over 16 KiB", 20 << 10, protocol.FrameAck},
		{"largest", protocol.MaxSealedInfoChars * 6 / 8, protocol.FrameAck},
		{"one byte over", protocol.MaxSealedInfoChars*6/8 + 1, protocol.FrameError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sealed := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, tc.bytes))
			send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{"mode":"remote","sealed":"` + sealed + `"}`)})
			if f := recv(t, cli); f.Type != tc.want {
				t.Fatalf("%d characters: %s %s %q, want %s", len(sealed), f.Type, f.Code, f.Message, tc.want)
			}
		})
	}
}

// The app endpoint refuses what apps must not send in the same way.
func TestRefusedAppFrames(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	recv(t, cli)
	app := r.dial(t, testToken, "/ws/app")
	big := strings.Repeat("y", protocol.MaxCommandBytes+1)
	for _, tc := range []struct {
		name  string
		frame []byte
		code  string
		says  string
	}{
		{"prompt with invalid UTF-8", withInvalidUTF8(frameJSON(protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "k1", Kind: protocol.CommandPrompt, Text: "XX"}})), "bad-command", "UTF-8"},
		{"subscribe with invalid UTF-8", withInvalidUTF8(frameJSON(protocol.Frame{Type: protocol.FrameSubscribe, Session: "XX"})), "bad-subscribe", "UTF-8"},
		{"command id not a cuid2", frameJSON(protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "--model", Kind: protocol.CommandPrompt, Text: "hi"}}), "bad-command", "cuid2"},
		{"command for a session id not a UUID", frameJSON(protocol.Frame{Type: protocol.FrameCommand, Session: "s1", Command: &protocol.Command{ID: "k2", Kind: protocol.CommandPrompt, Text: "hi"}}), "bad-command", "not a UUID"},
		{"prompt over its limit", frameJSON(protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "k3", Kind: protocol.CommandPrompt, Text: big}}), "bad-command", "more than"},
		{"model over its limit", frameJSON(protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "k4", Kind: protocol.CommandModel, Model: big[:protocol.MaxFieldBytes+1]}}), "bad-command", "more than"},
		{"subscribe to a session id not a UUID", frameJSON(protocol.Frame{Type: protocol.FrameSubscribe, Session: "../s1"}), "bad-subscribe", "not a UUID"},
		{"subscribe after a negative seq", frameJSON(protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, After: -1}), "bad-subscribe", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sendRaw(t, app, tc.frame)
			f := recv(t, app)
			if f.Type != protocol.FrameError || f.Code != tc.code || !strings.Contains(f.Message, tc.says) {
				t.Fatalf("got %s %q, want %s saying %q", f.Code, f.Message, tc.code, tc.says)
			}
		})
	}
	var n int
	if err := r.store.w.QueryRow(`SELECT COUNT(*) FROM commands`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d commands stored (%v)", n, err)
	}
}

// claude.NewSessionID makes ids the relay accepts.
func TestNewSessionIDAccepted(t *testing.T) {
	for range 100 {
		if id := claude.NewSessionID(); checkSession(id) != nil {
			t.Fatalf("%s refused", id)
		}
	}
}

// Lists carry a bounded summary of each session's info: a session list
// stays small however large the infos are, and keeps what apps show.
func TestListSendsBoundedSummaries(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	const sessions = 12
	filler := strings.Repeat("z", 100<<10)
	var perms []map[string]any
	for i := range 10 {
		perms = append(perms, map[string]any{"id": fmt.Sprint("toolu_", i), "tool": "Write", "description": "Write a file",
			"input": map[string]any{"file_path": "/w/p/big.txt", "content": filler}})
	}
	perms[0] = map[string]any{"id": "toolu_0", "tool": "Bash", "input": map[string]any{"command": "go test ./..."}, "forSession": []string{"Bash(go test:*)"}}
	info, _ := json.Marshal(map[string]any{"title": "Fix the tests " + strings.Repeat("t", protocol.MaxInfoStringBytes-20), "status": "waiting-for-permission",
		"mode": "remote", "cwd": "/w/p", "permissions": perms, "extra": map[string]any{"blob": filler}})
	if len(info) < 900<<10 {
		t.Fatalf("info of %d bytes is not large", len(info))
	}
	for i := range sessions {
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: fmt.Sprintf("5e55a001-0000-4000-8000-%012d", i), Info: info})
		if f := recv(t, cli); f.Type != protocol.FrameAck {
			t.Fatalf("%+v", f)
		}
	}
	app := r.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := app.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > sessions*8<<10 {
		t.Fatalf("a list of %d sessions is %d bytes (%d of info each)", sessions, len(b), len(info))
	}
	var f protocol.Frame
	if err := json.Unmarshal(b, &f); err != nil || len(f.Sessions) != sessions {
		t.Fatalf("%d sessions, %v", len(f.Sessions), err)
	}
	var sum struct {
		Title       string `json:"title"`
		Status      string `json:"status"`
		Permissions []struct {
			ID         string         `json:"id"`
			Tool       string         `json:"tool"`
			Input      map[string]any `json:"input"`
			ForSession []string       `json:"forSession"`
		} `json:"permissions"`
		Extra any `json:"extra"`
	}
	s0 := f.Sessions[0]
	if len(s0.Info) > MaxSummaryBytes {
		t.Fatalf("a summary of %d bytes", len(s0.Info))
	}
	if err := json.Unmarshal(s0.Info, &sum); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sum.Title, "Fix the tests") || len(sum.Title) > summaryStringBytes || sum.Status != "waiting-for-permission" || sum.Extra != nil {
		t.Fatalf("summary %.300s", s0.Info)
	}
	if len(sum.Permissions) != summaryPermissions || sum.Permissions[0].Input["command"] != "go test ./..." || sum.Permissions[0].ForSession[0] != "Bash(go test:*)" ||
		sum.Permissions[1].Input["file_path"] != "/w/p/big.txt" || sum.Permissions[1].Input["content"] != nil {
		t.Fatalf("permissions in the summary %.600s", s0.Info)
	}
	// A change sent to listing apps is the same summary.
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: fmt.Sprintf("5e55a001-0000-4000-8000-%012d", 0), Info: info})
	recv(t, cli)
	if _, b, err := app.Read(ctx); err != nil || len(b) > 8<<10 {
		t.Fatalf("session change of %d bytes (%v)", len(b), err)
	}
}

// subscribe with after beyond the session's end is clamped to the end:
// caught-up says where the session ends, and later envelopes arrive.
func TestSubscribeAfterEndClamped(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 3)})
	recv(t, cli)
	app := r.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, After: 1000})
	if f := recv(t, app); f.Type != protocol.FrameCaughtUp || f.Seq != 3 {
		t.Fatalf("%+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 3, 5)})
	recv(t, cli)
	if f := recv(t, app); f.Type != protocol.FrameBatch || len(f.Items) != 2 || f.Items[0].Seq != 4 {
		t.Fatalf("%+v", f)
	}
}

// An envelope id stored before with other content: the first stays and is
// acked with its seq, and the conflict is counted and logged at Warn. The
// same content again is no conflict.
func TestEnvelopeConflictsCounted(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	id := protocol.DeriveID(s1, "x")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: []json.RawMessage{envelopeJSON(textEnvelope(id, "first"))}})
	recv(t, cli)
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: []json.RawMessage{envelopeJSON(textEnvelope(id, "first"))}})
	recv(t, cli)
	if n := r.relay.Stats().Conflicts; n != 0 {
		t.Fatalf("a resend counted as %d conflicts", n)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: append(envelopes(s1, 0, 1), envelopeJSON(textEnvelope(id, "second")))})
	if f := recv(t, cli); f.Type != protocol.FrameAck || f.Acks[1].Seq != 1 || f.Acks[0].Seq != 2 {
		t.Fatalf("%+v", f)
	}
	if n := r.relay.Stats().Conflicts; n != 1 {
		t.Fatalf("%d conflicts, want 1", n)
	}
	if l := r.log.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, id) || !strings.Contains(l, s1) {
		t.Fatalf("conflict not logged at Warn:\n%s", l)
	}
	rows, _ := r.store.Read(context.Background(), s1, 0, 10)
	if len(rows) != 2 || !strings.Contains(string(rows[0].Body), "first") {
		t.Fatalf("stored %v", rows)
	}
}

// A database whose pages were overwritten is refused when the store opens.
func TestCorruptDatabaseRefusedAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 {
		var items []Item
		for j := range 50 {
			id := protocol.DeriveID(fmt.Sprint(i, j))
			items = append(items, Item{ID: id, Body: envelopeJSON(textEnvelope(id, strings.Repeat("w", 500)))})
		}
		if _, err := st.Append(ctx, s1, items); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		if fi, _ := os.Stat(path + "-wal"); fi.Size() > 0 {
			t.Fatalf("the WAL was not checkpointed (%d bytes)", fi.Size())
		}
	}
	const page = 4096
	if len(b) < 20*page {
		t.Fatalf("database of %d bytes", len(b))
	}
	for p := 3; p < len(b)/page; p += 2 { // every other page after the schema
		for i := p * page; i < (p+1)*page; i++ {
			b[i] = byte(i * 7)
		}
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = OpenStore(path)
	if err == nil {
		st.Close()
		t.Fatal("a damaged database opened")
	}
	if !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), path) {
		t.Fatalf("error does not say what is wrong: %v", err)
	}
}

// A subscriber whose read fails in the store is closed with a reason that
// says so (not "fell behind"), and the error is logged at Error with the
// session.
func TestStoreErrorClosesSubscriber(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 3)})
	recv(t, cli)
	r.store.r.Close() // every read fails from now on
	app := r.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := app.Read(ctx)
	var ce websocket.CloseError
	if !errorsAs(err, &ce) || ce.Code != websocket.StatusInternalError || !strings.Contains(ce.Reason, "store") || strings.Contains(ce.Reason, "behind") {
		t.Fatalf("closed with %v", err)
	}
	if l := r.log.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "session="+s1) {
		t.Fatalf("store error not logged at Error with the session:\n%s", l)
	}
}

// An append that finds the disk full is answered with a store error (the
// CLI keeps the batch) and logged at Error as a full disk, with the session.
func TestDiskFullLoggedAtError(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 1)})
	recv(t, cli)
	var pages int
	if err := r.store.w.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.w.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	var batch []json.RawMessage
	for i := range 20 {
		id := protocol.DeriveID("full", fmt.Sprint(i))
		batch = append(batch, envelopeJSON(textEnvelope(id, strings.Repeat("f", 8000))))
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: batch})
	if f := recv(t, cli); f.Type != protocol.FrameError || f.Code != "store" {
		t.Fatalf("%+v", f)
	}
	if l := r.log.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "disk full") || !strings.Contains(l, "session="+s1) {
		t.Fatalf("disk full not logged at Error:\n%s", l)
	}
	if n := r.relay.Stats().StoreErrors; n != 1 {
		t.Fatalf("%d store errors counted", n)
	}
}

// fakeNow is a clock the test moves.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeNow) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// Command ids are scoped to their owner and session: another token reusing
// an id gets its own command, never the first one's status; a CLI answers
// only commands of its session that were delivered to it.
func TestCommandIDsScoped(t *testing.T) {
	r := startTestRelay(t, "alice-token", "bob-token")
	announce := func(tok, session string) *websocket.Conn {
		c := r.dial(t, tok, "/ws/cli")
		send(t, c, protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Info: json.RawMessage(`{}`)})
		if f := recv(t, c); f.Type != protocol.FrameAck {
			t.Fatalf("%+v", f)
		}
		return c
	}
	aliceCLI := announce("alice-token", a1)
	aliceCLI.Close(websocket.StatusNormalClosure, "") // offline: prompts wait
	bobCLI := announce("bob-token", s1)
	bobCLI.Close(websocket.StatusNormalClosure, "")
	r.waitNoOwner(t)
	alice := r.dial(t, "alice-token", "/ws/app")
	send(t, alice, protocol.Frame{Type: protocol.FrameCommand, Session: a1, Command: &protocol.Command{ID: "k1", Kind: protocol.CommandPrompt, Text: "the secret plan"}})
	if f := recv(t, alice); f.Status != protocol.StatusQueued || f.Session != a1 {
		t.Fatalf("%+v", f)
	}
	bob := r.dial(t, "bob-token", "/ws/app")
	send(t, bob, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "k1", Kind: protocol.CommandAbort}})
	if f := recv(t, bob); f.Type != protocol.FrameStatus || f.Session != s1 || f.Status != protocol.StatusRejected || !strings.Contains(f.Message, "no CLI") {
		t.Fatalf("bob's k1 answered with %+v", f)
	}
	// Alice's k1 is untouched: her CLI gets her prompt.
	aliceCLI = announce("alice-token", a1)
	if f := recv(t, aliceCLI); f.Type != protocol.FrameCommand || f.Command.ID != "k1" || f.Command.Text != "the secret plan" {
		t.Fatalf("%+v", f)
	}
	if f := recv(t, alice); f.Status != protocol.StatusDelivered {
		t.Fatalf("%+v", f)
	}
	// Another CLI of the same token, owning another session, cannot answer
	// it, neither as its own session's nor as Alice's first session's.
	other := announce("alice-token", s2)
	for _, session := range []string{s2, a1} {
		send(t, other, protocol.Frame{Type: protocol.FrameResult, Session: session, Command: &protocol.Command{ID: "k1"}, Status: protocol.StatusDone})
		if f := recv(t, other); f.Type != protocol.FrameError || f.Code != "not-delivered" {
			t.Fatalf("result for %s from another CLI: %+v", session, f)
		}
	}
	// Bob's CLI cannot answer it either.
	bobCLI = announce("bob-token", s1)
	send(t, bobCLI, protocol.Frame{Type: protocol.FrameResult, Session: a1, Command: &protocol.Command{ID: "k1"}, Status: protocol.StatusDone})
	if f := recv(t, bobCLI); f.Type != protocol.FrameError {
		t.Fatalf("%+v", f)
	}
	// The CLI it was delivered to can, once.
	send(t, aliceCLI, protocol.Frame{Type: protocol.FrameResult, Session: a1, Command: &protocol.Command{ID: "k1"}, Status: protocol.StatusDone})
	if f := recv(t, aliceCLI); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	if f := recv(t, alice); f.Status != protocol.StatusDone {
		t.Fatalf("%+v", f)
	}
	send(t, aliceCLI, protocol.Frame{Type: protocol.FrameResult, Session: a1, Command: &protocol.Command{ID: "k1"}, Status: protocol.StatusRejected, Message: "again"})
	if f := recv(t, aliceCLI); f.Type != protocol.FrameError || f.Code != "not-delivered" {
		t.Fatalf("a second answer: %+v", f)
	}
	c, err := r.store.Command(context.Background(), OwnerID("alice-token"), a1, "k1")
	if err != nil || c.Status != protocol.StatusDone {
		t.Fatalf("%+v %v", c, err)
	}
}

// Each endpoint takes only its role's frames: the app endpoint does not
// store envelopes, announcements, live frames or results; the CLI endpoint
// does not take commands, subscriptions or lists.
func TestEndpointsTakeOnlyTheirFrames(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 1)})
	recv(t, cli)
	app := r.dial(t, testToken, "/ws/app")
	for _, f := range []protocol.Frame{
		{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 1, 2)},
		{Type: protocol.FrameEnvelopes, Session: s2, Envelopes: envelopes(s2, 0, 1)},
		{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{"title":"from an app"}`)},
		{Type: protocol.FrameAnnounce, Session: s2, Info: json.RawMessage(`{}`)},
		{Type: protocol.FrameLive, Session: s1, Payload: json.RawMessage(`{"text":"x"}`)},
		{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: "k1"}, Status: protocol.StatusDone},
		{Type: protocol.FrameAck, Session: s1},
	} {
		send(t, app, f)
		if got := recv(t, app); got.Type != protocol.FrameError || got.Code != "bad-type" {
			t.Fatalf("app sent %s: %+v", f.Type, got)
		}
	}
	for _, f := range []protocol.Frame{
		{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "k2", Kind: protocol.CommandPrompt, Text: "hi"}},
		{Type: protocol.FrameSubscribe, Session: s1},
		{Type: protocol.FrameList},
		{Type: protocol.FrameStatus, Session: s1, Command: &protocol.Command{ID: "k2"}, Status: protocol.StatusDone},
	} {
		send(t, cli, f)
		if got := recv(t, cli); got.Type != protocol.FrameError || got.Code != "bad-type" {
			t.Fatalf("CLI sent %s: %+v", f.Type, got)
		}
	}
	if n := sessionCount(t, r.store); n != 1 {
		t.Fatalf("%d sessions", n)
	}
	si, err := r.store.session(context.Background(), s1)
	if err != nil || si.LastSeq != 1 || strings.Contains(string(si.Info), "from an app") {
		t.Fatalf("%+v %v", si, err)
	}
	var n int
	if err := r.store.w.QueryRow(`SELECT COUNT(*) FROM commands`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d commands (%v)", n, err)
	}
}

// Queued prompts: at most MaxQueuedPrompts per session (one more is
// rejected, saying why), rejected once they waited QueuedPromptTTL, and
// final commands are deleted after CommandRetention.
func TestQueuedPromptsCappedExpiredPruned(t *testing.T) {
	r := startTestRelay(t)
	clock := &fakeNow{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	r.store.now = clock.now
	cli := r.dial(t, testToken, "/ws/cli")
	for _, s := range []string{s1, s2} {
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s, Info: json.RawMessage(`{}`)})
		recv(t, cli)
	}
	cli.Close(websocket.StatusNormalClosure, "")
	r.waitNoOwner(t)
	app := r.dial(t, testToken, "/ws/app")
	prompt := func(session, id string) protocol.Frame {
		t.Helper()
		send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: "go"}})
		f := recv(t, app)
		if f.Type != protocol.FrameStatus || f.Command.ID != id {
			t.Fatalf("%+v", f)
		}
		return f
	}
	for i := range MaxQueuedPrompts {
		if f := prompt(s1, fmt.Sprint("q", i)); f.Status != protocol.StatusQueued {
			t.Fatalf("prompt %d: %+v", i, f)
		}
		clock.advance(time.Minute)
	}
	if f := prompt(s1, "over"); f.Status != protocol.StatusRejected || !strings.Contains(f.Message, fmt.Sprint(MaxQueuedPrompts)) {
		t.Fatalf("prompt over the cap: %+v", f)
	}
	if f := prompt(s2, "other"); f.Status != protocol.StatusQueued {
		t.Fatalf("the cap is per session: %+v", f)
	}
	// The first prompts expire; the app that sent them hears it.
	clock.advance(QueuedPromptTTL - time.Duration(MaxQueuedPrompts)*time.Minute + 30*time.Second)
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s2, Command: &protocol.Command{ID: "later", Kind: protocol.CommandPrompt, Text: "go"}})
	rejected := map[string]string{}
	for {
		f := recv(t, app)
		if f.Type != protocol.FrameStatus {
			t.Fatalf("%+v", f)
		}
		if f.Command.ID == "later" {
			break
		}
		if f.Status == protocol.StatusRejected {
			rejected[f.Command.ID] = f.Message
		}
	}
	if len(rejected) != 1 || !strings.Contains(rejected["q0"], "no CLI carried this command out within") {
		t.Fatalf("expired: %v", rejected)
	}
	// Its CLI comes back: it gets the prompts that did not expire, in
	// order, and none that did.
	cli = r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	if f := recv(t, cli); f.Type != protocol.FrameCommand || f.Command.ID != "q1" {
		t.Fatalf("first delivered: %+v", f)
	}
	for i := 1; i < MaxQueuedPrompts; i++ {
		if f := recv(t, app); f.Status != protocol.StatusDelivered || f.Command.ID != fmt.Sprint("q", i) {
			t.Fatalf("%+v", f)
		}
	}
	// Final commands are deleted after CommandRetention.
	count := func(status string) int {
		var n int
		if err := r.store.w.QueryRow(`SELECT COUNT(*) FROM commands WHERE status = ?`, status).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count(protocol.StatusRejected) != 2 {
		t.Fatalf("%d rejected", count(protocol.StatusRejected))
	}
	clock.advance(CommandRetention + time.Minute)
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s2, Command: &protocol.Command{ID: "last", Kind: protocol.CommandPrompt, Text: "go"}})
	for f := recv(t, app); f.Command.ID != "last"; f = recv(t, app) {
		if f.Status != protocol.StatusRejected { // s2's prompts expire meanwhile
			t.Fatalf("%+v", f)
		}
	}
	for _, id := range []string{"q0", "over"} {
		if _, err := r.store.Command(context.Background(), OwnerID(testToken), s1, id); err == nil {
			t.Fatalf("%s kept after %v", id, CommandRetention)
		}
	}
	// Rejected just now: s2's two queued prompts, and s1's prompts its CLI
	// took and never answered.
	if n := count(protocol.StatusRejected); n != 2+MaxQueuedPrompts-1 {
		t.Fatalf("%d rejected commands", n)
	}
}

// A daemon's start and stop wait on the relay while the machine is not
// connected (a relay or network restart), as prompts do, and reach it in
// order when it is back; a command that answers what the app shows now
// (a permission) is rejected at once.
func TestDaemonCommandsWaitForTheMachine(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{"mode":"machine"}`)})
	recv(t, cli)
	cli.Close(websocket.StatusNormalClosure, "")
	r.waitNoOwner(t)
	app := r.dial(t, testToken, "/ws/app")
	for _, c := range []protocol.Command{
		{ID: "start1", Kind: protocol.CommandStart, Dir: "/home/me/app", Target: s2, Text: "go"},
		{ID: "stop1", Kind: protocol.CommandStop, Target: s2},
		{ID: "perm1", Kind: protocol.CommandPermission, RequestID: "r1", Allow: true},
	} {
		send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &c})
		f := recv(t, app)
		want := protocol.StatusQueued
		if c.Kind == protocol.CommandPermission {
			want = protocol.StatusRejected
		}
		if f.Type != protocol.FrameStatus || f.Command.ID != c.ID || f.Status != want {
			t.Fatalf("%s: %+v, want %s", c.Kind, f, want)
		}
	}
	cli = r.dial(t, testToken, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{"mode":"machine"}`)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	for _, id := range []string{"start1", "stop1"} {
		if f := recv(t, cli); f.Type != protocol.FrameCommand || f.Command.ID != id || f.Command.Target != s2 {
			t.Fatalf("delivered %+v, want %s", f, id)
		}
	}
}

// subscribe with before sends the stored envelopes between after and
// before only (across history pages), then caught-up at the last one sent,
// and no live envelopes after it; before at or below after+1 sends none.
func TestSubscribeBefore(t *testing.T) {
	r := startTestRelay(t)
	cli := r.dial(t, testToken, "/ws/cli")
	const stored = 1300 // more than two history pages
	for from := 0; from < stored; from += 100 {
		send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, from, from+100)})
		recv(t, cli)
	}
	for _, c := range []struct {
		after, before int64
		last          int64 // caught-up's seq
		n             int   // envelopes sent
	}{
		{0, 1101, 1100, 1100},
		{10, 600, 599, 589},
		{0, 2, 1, 1},
		{5, 6, 5, 0},
		{5, 3, 5, 0},
		{0, 9999, stored, stored},
	} {
		app := r.dial(t, testToken, "/ws/app")
		send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, After: c.after, Before: c.before})
		next := c.after + 1
		for {
			f := recvType(t, app, protocol.FrameBatch, protocol.FrameCaughtUp)
			if f.Type == protocol.FrameCaughtUp {
				if f.Seq != c.last || next-1-c.after != int64(c.n) {
					t.Fatalf("after %d before %d: caught-up at %d after %d envelopes, want %d after %d", c.after, c.before, f.Seq, next-1-c.after, c.last, c.n)
				}
				break
			}
			for _, it := range f.Items {
				if it.Seq != next || it.Seq >= c.before {
					t.Fatalf("after %d before %d: seq %d, want %d (below %d)", c.after, c.before, it.Seq, next, c.before)
				}
				next++
			}
		}
		app.Close(websocket.StatusNormalClosure, "")
	}
	// A bounded subscription is not followed live: an envelope stored after
	// its caught-up is not sent to it, while an open subscription gets it.
	bounded := r.dial(t, testToken, "/ws/app")
	send(t, bounded, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, After: stored - 1, Before: stored + 10})
	recvType(t, bounded, protocol.FrameBatch)
	recvType(t, bounded, protocol.FrameCaughtUp)
	open := r.dial(t, testToken, "/ws/app")
	send(t, open, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, After: stored})
	recvType(t, open, protocol.FrameCaughtUp)
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, stored, stored+1)})
	recv(t, cli)
	if f := recvType(t, open, protocol.FrameBatch); f.Items[0].Seq != stored+1 {
		t.Fatalf("%+v", f)
	}
	// The bounded one answers a bad subscribe next, with no batch before it.
	send(t, bounded, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, After: -1})
	if f := recv(t, bounded); f.Type != protocol.FrameError || f.Code != "bad-subscribe" {
		t.Fatalf("after the bound: %+v", f)
	}
	send(t, bounded, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, Before: -1})
	if f := recv(t, bounded); f.Type != protocol.FrameError || f.Code != "bad-subscribe" {
		t.Fatalf("before -1: %+v", f)
	}
}
