package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// blobEnvelopes are a cut tool result and a prompt image of session, with
// their blobs.
func blobEnvelopes(t *testing.T, session string) ([]json.RawMessage, []protocol.Blob) {
	t.Helper()
	full := strings.Repeat("line of output\n", 600)
	preview := full[:protocol.MaxResultBytes]
	img := []byte("\x89PNG\r\n\x1a\n not really, but the relay does not decode images")
	size := int64(len(img))
	end := protocol.Envelope{ID: protocol.DeriveID(session, "end"), Time: 1, Role: protocol.RoleAgent, Turn: protocol.DeriveID(session, "turn"),
		Ev: protocol.Event{T: protocol.KindToolCallEnd, Call: "toolu_1", Result: &preview, Truncated: true, Full: int64(len(full))}}
	file := protocol.Envelope{ID: protocol.DeriveID(session, "file"), Time: 2, Role: protocol.RoleUser,
		Ev: protocol.Event{T: protocol.KindFile, Name: "image-1.png", Size: &size, MimeType: "image/png"}}
	file.Ev.Ref = file.ID
	var raws []json.RawMessage
	for _, e := range []protocol.Envelope{end, file} {
		b, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	return raws, []protocol.Blob{{ID: end.ID, Data: []byte(full)}, {ID: file.ID, Data: img}}
}

func TestBlobsStoredBesideEnvelopes(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	srv := httptest.NewServer(NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken, "other-token").Handler())
	t.Cleanup(srv.Close)
	raws, blobs := blobEnvelopes(t, a1)
	cli := dial(t, srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: raws, Blobs: blobs})
	if f := recv(t, cli); f.Type != protocol.FrameAck || len(f.Acks) != 2 {
		t.Fatalf("%+v", f)
	}
	// Sent again (a CLI that did not see the ack): the same, nothing twice.
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: raws, Blobs: blobs})
	if f := recv(t, cli); f.Type != protocol.FrameAck || len(f.Acks) != 2 || f.Acks[1].Seq != 2 {
		t.Fatalf("%+v", f)
	}

	app := dial(t, srv, "/ws/app")
	// The stored envelopes are as sent: no blob in them.
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: a1})
	got := recv(t, app)
	if got.Type != protocol.FrameBatch || len(got.Items) != 2 || !bytes.Equal(got.Items[0].Envelope, raws[0]) || bytes.Contains(got.Items[0].Envelope, blobs[0].Data[:5000]) {
		t.Fatalf("batch %+v", got.Type)
	}
	for _, b := range blobs {
		send(t, app, protocol.Frame{Type: protocol.FrameBlob, Ref: "r-" + b.ID, Session: a1, ID: b.ID})
		f := recvType(t, app, protocol.FrameBlob, protocol.FrameError)
		if f.Type != protocol.FrameBlob || f.Ref != "r-"+b.ID || f.ID != b.ID || len(f.Blobs) != 1 || !bytes.Equal(f.Blobs[0].Data, b.Data) {
			t.Fatalf("blob %s: %+v", b.ID, f)
		}
	}
	// No blob beside a text envelope; a bad id; another token's app.
	for _, tc := range []struct {
		name, token, id, code string
	}{
		{"unknown envelope", testToken, protocol.DeriveID(a1, "none"), "not-found"},
		{"not a cuid2", testToken, "../../etc", "bad-blob"},
		{"another token", "other-token", blobs[0].ID, "not-found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := websocket.Dial(context.Background(), wsURL(srv, "/ws/app"), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tc.token}}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			send(t, c, protocol.Frame{Type: protocol.FrameBlob, Ref: "x", Session: a1, ID: tc.id})
			if f := recv(t, c); f.Type != protocol.FrameError || f.Code != tc.code || f.Ref != "x" || len(f.Blobs) != 0 {
				t.Fatalf("%+v", f)
			}
		})
	}
	// A deleted session takes its blobs with it.
	owner, _ := st.OwnerOf(context.Background(), a1)
	if err := st.DeleteSession(context.Background(), owner, a1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Blob(context.Background(), a1, blobs[0].ID); err != ErrNoBlob {
		t.Fatalf("after delete: %v", err)
	}
}

// recvType reads frames until one of the types comes (skipping, e.g.,
// caught-up).
func recvType(t *testing.T, c *websocket.Conn, types ...string) protocol.Frame {
	t.Helper()
	for {
		f := recv(t, c)
		for _, ty := range types {
			if f.Type == ty {
				return f
			}
		}
	}
}

func TestBlobsRefused(t *testing.T) {
	raws, blobs := blobEnvelopes(t, a1)
	text := envelopes(a1, 0, 1)
	textID := protocol.DeriveID(a1, "0")
	longer := append(append([]byte(nil), blobs[0].Data...), 'x')
	bad := append([]byte(nil), blobs[0].Data...)
	bad[10] = 0xff
	tests := []struct {
		name  string
		envs  []json.RawMessage
		blobs []protocol.Blob
		code  string
	}{
		{"blob of no envelope of the batch", raws[:1], []protocol.Blob{{ID: textID, Data: []byte("x")}}, "bad-batch"},
		{"two blobs for one envelope", raws, []protocol.Blob{blobs[0], blobs[0]}, "bad-batch"},
		{"more blobs than envelopes", raws[:1], []protocol.Blob{blobs[0], blobs[1]}, "bad-batch"},
		{"a text envelope's blob", text, []protocol.Blob{{ID: textID, Data: []byte("x")}}, "bad-envelope"},
		{"result longer than its full", raws, []protocol.Blob{{ID: blobs[0].ID, Data: longer}}, "bad-envelope"},
		{"result not UTF-8", raws, []protocol.Blob{{ID: blobs[0].ID, Data: bad}}, "bad-envelope"},
		{"image of another size", raws, []protocol.Blob{{ID: blobs[1].ID, Data: []byte("short")}}, "bad-envelope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRelay(t)
			cli := dial(t, srv, "/ws/cli")
			send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: tc.envs, Blobs: tc.blobs})
			if f := recv(t, cli); f.Type != protocol.FrameError || f.Code != tc.code {
				t.Fatalf("%+v", f)
			}
		})
	}
	// An image of a type the app would not show as one.
	size := int64(3)
	file := protocol.Envelope{ID: protocol.DeriveID(a1, "svg"), Time: 2, Role: protocol.RoleUser,
		Ev: protocol.Event{T: protocol.KindFile, Name: "a.svg", Size: &size, MimeType: "image/svg+xml"}}
	file.Ev.Ref = file.ID
	raw, _ := file.AppendJSON(nil)
	srv := startRelay(t)
	cli := dial(t, srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: []json.RawMessage{raw}, Blobs: []protocol.Blob{{ID: file.ID, Data: []byte("<s>")}}})
	if f := recv(t, cli); f.Type != protocol.FrameError || f.Code != "bad-envelope" || !strings.Contains(f.Message, "svg") {
		t.Fatalf("svg: %+v", f)
	}
}
