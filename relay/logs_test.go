package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// Logs: a line per connection opened and closed (role, address, duration,
// reason) and per refused request, as JSON; after a run in which every
// prompt, title, envelope and live frame held a marker, and a refused login
// offered it as a token, the logs do not contain it.
func TestLogsHoldNoContent(t *testing.T) {
	const marker = "MARKER-7f3a-secret"
	var logs syncBuffer
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	rs := NewServer(st, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), testToken)
	srv := httptest.NewServer(rs.Handler())
	defer srv.Close()

	cli := dial(t, srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(fmt.Sprintf(`{"cwd":"/w/%s","title":%q,"mode":"remote","status":"idle"}`, marker, marker))})
	recv(t, cli)
	var envs []json.RawMessage
	for i := range 3 {
		e := protocol.Envelope{ID: protocol.DeriveID(s1, fmt.Sprint(i)), Time: int64(1000 + i), Role: protocol.RoleUser, Ev: protocol.Event{T: protocol.KindText, Text: "prompt " + marker}}
		b, _ := e.AppendJSON(nil)
		envs = append(envs, b)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envs})
	recv(t, cli)
	send(t, cli, protocol.Frame{Type: protocol.FrameLive, Session: s1, Payload: json.RawMessage(fmt.Sprintf(`{"text":%q}`, marker))})
	app := dial(t, srv, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: "do it " + marker}})
	// The CLI gets the prompt; it answers it.
	for {
		f := recv(t, cli)
		if f.Type == protocol.FrameCommand {
			send(t, cli, protocol.Frame{Type: protocol.FrameResult, Session: s1, Command: &protocol.Command{ID: f.Command.ID}, Status: protocol.StatusDone, Message: marker})
			break
		}
	}
	// A refused login offering the marker as its token.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, _, err := websocket.Dial(ctx, wsURL(srv, "/ws/app"), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + marker}}}); err == nil {
		c.CloseNow()
		t.Fatal("a wrong token was accepted")
	}
	cli.Close(websocket.StatusNormalClosure, "")
	app.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), `"msg":"connection closed"`) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no close lines:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond) // polling the log, with a deadline
	}
	out := logs.String()
	if strings.Contains(out, marker) {
		t.Fatalf("the logs hold content:\n%s", out)
	}
	var opened, closed, refused int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		switch l["msg"] {
		case "connection opened":
			opened++
			if l["role"] == nil || l["addr"] == nil || l["credential"] != "bootstrap token" {
				t.Errorf("opened line %v", l)
			}
		case "connection closed":
			closed++
			if l["role"] == nil || l["addr"] == nil || l["credential"] == nil || l["duration"] == nil || l["reason"] == nil {
				t.Errorf("closed line %v", l)
			}
		case "login failed":
			refused++
		}
	}
	if opened != 2 || closed != 2 || refused != 1 {
		t.Fatalf("opened %d, closed %d, refused %d:\n%s", opened, closed, refused, out)
	}
}

// The connection log grows by one line per connection at the default
// level: the line written when it closes says who, from where, for how
// long and why; the one when it opens is a debug line.
func TestConnectionLogLinePerConnection(t *testing.T) {
	var logs syncBuffer
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	rs := NewServer(st, slog.New(slog.NewJSONHandler(&logs, nil)), testToken)
	srv := httptest.NewServer(rs.Handler())
	defer srv.Close()
	const n = 20
	for i := range n {
		path := "/ws/app"
		if i%2 == 1 {
			path = "/ws/cli"
		}
		dial(t, srv, path).Close(websocket.StatusNormalClosure, "")
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), `"msg":"connection closed"`) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d close lines:\n%s", n, logs.String())
		}
		time.Sleep(5 * time.Millisecond) // polling the log, with a deadline
	}
	out := logs.String()
	if lines := strings.Count(out, "\n"); lines != n {
		t.Fatalf("%d connections wrote %d log lines, want %d:\n%s", n, lines, n, out)
	}
	t.Logf("%d bytes of log per connection", len(out)/n)
}
