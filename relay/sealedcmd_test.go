package relay

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// A plaintext command to a session the relay knows is end-to-end
// encrypted (its machine sent wrapped keys for it, or announced it
// sealed; a daemon's machine session is one of these) is refused with
// the error code not-sealed, naming the command, and is written nowhere:
// not in the commands table, not in the database's files, not in the
// log; the session's CLI never gets it. A sealed command to the same
// session, and a plaintext one to a plaintext session, go through.
func TestRelayRefusesPlaintextCommandToSealedSession(t *testing.T) {
	dir := t.TempDir()
	st := openTestStore(t, filepath.Join(dir, "relay.db"))
	logs := &testutil.SyncBuffer{}
	rs := NewServer(st, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), testToken)
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)
	r := &testRelay{srv: srv, relay: rs, store: st, log: logs}

	phone, phoneID := pairDevice(t, r, "phone", bytes.Repeat([]byte{1}, 32))
	cli := dialAs(t, r, testToken, "/ws/cli")
	machine := b64(32, 5)
	const (
		keyed     = "5ea1ed01-0000-4000-8000-000000000001"
		announced = "5ea1ed01-0000-4000-8000-000000000002"
		daemon    = "5ea1ed01-0000-4000-8000-000000000003"
		plain     = "5ea1ed01-0000-4000-8000-000000000004"
	)
	announce := func(session, info string) {
		t.Helper()
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Ref: "a-" + session, Session: session, Info: json.RawMessage(info)})
		if f := recvType(t, cli, protocol.FrameAck, protocol.FrameError); f.Type != protocol.FrameAck {
			t.Fatalf("announce %s: %+v", session, f)
		}
	}
	// Keys first, as a CLI sends them, then a readable announce.
	send(t, cli, protocol.Frame{Type: protocol.FrameKeys, Ref: "k", Session: keyed, Machine: machine,
		Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: b64(113, 1)}}})
	if f := recvType(t, cli, protocol.FrameAck, protocol.FrameError); f.Type != protocol.FrameAck {
		t.Fatalf("keys: %+v", f)
	}
	announce(keyed, `{"mode":"remote","status":"idle"}`)
	// Announced sealed, no key for this device (withheld, or never made).
	announce(announced, `{"mode":"remote","status":"idle","sealed":"`+b64(60, 3)+`"}`)
	announce(daemon, `{"mode":"machine","status":"idle","sealed":"`+b64(60, 4)+`"}`)
	announce(plain, `{"mode":"remote","status":"idle"}`)

	app := dialAs(t, r, phone, "/ws/app")
	ids := 0
	command := func(session string, cmd protocol.Command) protocol.Frame {
		t.Helper()
		ids++
		cmd.ID = "cmd" + strings.Repeat("q", ids)
		send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &cmd})
		return recvType(t, app, protocol.FrameError, protocol.FrameStatus)
	}
	for _, tc := range []struct {
		name, session string
		cmd           protocol.Command
	}{
		{"prompt to a session with keys", keyed, protocol.Command{Kind: protocol.CommandPrompt, Text: "MARKER-keyed-prompt"}},
		{"permission answer to a session with keys", keyed, protocol.Command{Kind: protocol.CommandPermission, RequestID: "r1", Allow: false, Reason: "MARKER-keyed-reason"}},
		{"prompt to a session announced sealed", announced, protocol.Command{Kind: protocol.CommandPrompt, Text: "MARKER-announced-prompt"}},
		{"start to a sealed machine", daemon, protocol.Command{Kind: protocol.CommandStart, Dir: "/home/dev/MARKER-daemon-folder", Target: plain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := command(tc.session, tc.cmd)
			if f.Type != protocol.FrameError || f.Code != "not-sealed" || f.Session != tc.session || f.Command == nil || f.Command.ID == "" ||
				!strings.Contains(f.Message, "end-to-end encrypted") || !strings.Contains(f.Message, "pair") {
				t.Fatalf("the relay answered %+v", f)
			}
			if c, err := st.Command(t.Context(), st.mustOwner(t, tc.session), tc.session, f.Command.ID); err == nil {
				t.Fatalf("the relay stored the command: %+v", c)
			}
		})
	}

	// A sealed command to the same session is taken and handed on.
	if f := command(keyed, protocol.Command{Kind: protocol.CommandPrompt, Sealed: b64(80, 9)}); f.Type != protocol.FrameStatus || f.Status != protocol.StatusDelivered {
		t.Fatalf("a sealed command: %+v", f)
	}
	// A plaintext session takes a plaintext prompt (whose text, unlike
	// the refused ones, can be found where the search below looks).
	if f := command(plain, protocol.Command{Kind: protocol.CommandPrompt, Text: "MARKER-plain-prompt"}); f.Type != protocol.FrameStatus || f.Status != protocol.StatusDelivered {
		t.Fatalf("a plaintext command to a plaintext session: %+v", f)
	}
	for {
		f := recvType(t, cli, protocol.FrameCommand)
		if strings.Contains(string(frameJSON(f)), "MARKER-") && f.Session != plain {
			t.Fatalf("the CLI got a refused command: %+v", f)
		}
		if f.Session == plain {
			break
		}
	}

	// Nothing of the refused commands in the database's files (the WAL
	// holds what was written last) or the log.
	files, _ := filepath.Glob(filepath.Join(dir, "relay.db*"))
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	all = append(all, logs.String()...)
	if !bytes.Contains(all, []byte("MARKER-plain-prompt")) {
		t.Fatalf("the search finds nothing, not even the accepted command (files %v)", files)
	}
	for _, m := range []string{"MARKER-keyed-prompt", "MARKER-keyed-reason", "MARKER-announced-prompt", "MARKER-daemon-folder"} {
		if bytes.Contains(all, []byte(m)) {
			t.Errorf("%s is in the relay's files or log", m)
		}
	}
}

// mustOwner is the owner of session (the tests' account).
func (s *Store) mustOwner(t *testing.T, session string) string {
	t.Helper()
	o, err := s.OwnerOf(t.Context(), session)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A readable reason in a result for a sealed session (a ccrelay from
// before reasons were sealed sends one) is not kept or passed on: the
// relay puts a text of its own in its place, so that its store, its log
// and the apps hold nothing of what the machine said. A plaintext
// session's reason is kept as before.
func TestRelayKeepsNoReadableResultOfSealedSession(t *testing.T) {
	dir := t.TempDir()
	st := openTestStore(t, filepath.Join(dir, "relay.db"))
	logs := &testutil.SyncBuffer{}
	rs := NewServer(st, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), testToken)
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)
	r := &testRelay{srv: srv, relay: rs, store: st, log: logs}

	phone, phoneID := pairDevice(t, r, "phone", bytes.Repeat([]byte{1}, 32))
	cli := dialAs(t, r, testToken, "/ws/cli")
	const (
		keyed = "5ea1ed02-0000-4000-8000-000000000001"
		plain = "5ea1ed02-0000-4000-8000-000000000002"
	)
	send(t, cli, protocol.Frame{Type: protocol.FrameKeys, Ref: "k", Session: keyed, Machine: b64(32, 5),
		Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: b64(113, 1)}}})
	if f := recvType(t, cli, protocol.FrameAck, protocol.FrameError); f.Type != protocol.FrameAck {
		t.Fatalf("keys: %+v", f)
	}
	for _, s := range []string{keyed, plain} {
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Ref: "a-" + s, Session: s, Info: json.RawMessage(`{"mode":"remote","status":"idle"}`)})
		if f := recvType(t, cli, protocol.FrameAck, protocol.FrameError); f.Type != protocol.FrameAck {
			t.Fatalf("announce %s: %+v", s, f)
		}
	}
	app := dialAs(t, r, phone, "/ws/app")
	for _, tc := range []struct {
		name, session, id string
		cmd               protocol.Command
		reason, want      string
	}{
		{"sealed", keyed, "cmdsealedreason", protocol.Command{Kind: protocol.CommandPrompt, Sealed: b64(80, 9)}, "MARKER-older-cli-reason /home/dev/secret", ResultMessageNotKept},
		{"plaintext", plain, "cmdplainreason", protocol.Command{Kind: protocol.CommandPrompt, Text: "hi"}, "MARKER-plain-reason", "MARKER-plain-reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := tc.cmd
			cmd.ID = tc.id
			send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: tc.session, Command: &cmd})
			if f := recvType(t, app, protocol.FrameStatus, protocol.FrameError); f.Status != protocol.StatusDelivered {
				t.Fatalf("the command: %+v", f)
			}
			recvType(t, cli, protocol.FrameCommand)
			send(t, cli, protocol.Frame{Type: protocol.FrameResult, Ref: "res-" + tc.id, Session: tc.session, Command: &protocol.Command{ID: tc.id},
				Status: protocol.StatusRejected, Message: tc.reason})
			if f := recvType(t, cli, protocol.FrameAck, protocol.FrameError); f.Type != protocol.FrameAck {
				t.Fatalf("the result: %+v", f)
			}
			if f := recvType(t, app, protocol.FrameStatus); f.Status != protocol.StatusRejected || f.Message != tc.want {
				t.Fatalf("the app got %+v, want the message %q", f, tc.want)
			}
			if c, err := st.Command(t.Context(), st.mustOwner(t, tc.session), tc.session, tc.id); err != nil || c.Message != tc.want {
				t.Fatalf("stored %+v %v, want the message %q", c, err, tc.want)
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join(dir, "relay.db*"))
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	all = append(all, logs.String()...)
	if !bytes.Contains(all, []byte("MARKER-plain-reason")) {
		t.Fatalf("the search finds nothing, not even the plaintext session's reason (files %v)", files)
	}
	if bytes.Contains(all, []byte("MARKER-older-cli-reason")) {
		t.Error("the sealed session's readable reason is in the relay's files or log")
	}
}
