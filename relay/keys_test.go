package relay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/pgtest"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// pairDevice pairs a device with a public key and a confirmation tag
// through a code the relay token asked for, and returns its credential and
// id after checking what GET /api/pair/result tells the asker.
func pairDevice(t *testing.T, r *testRelay, name string, pub []byte) (cred, id string) {
	t.Helper()
	code, b := api(t, r.srv, "POST", "/api/pair", testToken, pairRequest{Role: RoleDevice, MachineKey: bytes.Repeat([]byte{7}, 32)})
	if code != http.StatusOK {
		t.Fatalf("pair: %d %s", code, b)
	}
	var pa pairAnswer
	json.Unmarshal(b, &pa)
	if code, _ := api(t, r.srv, "GET", "/api/pair/result?code="+pa.Code, testToken, nil); code != http.StatusAccepted {
		t.Fatalf("result before redemption: %d", code)
	}
	confirm := bytes.Repeat([]byte{9}, 32)
	code, b = api(t, r.srv, "POST", "/api/pair/redeem", "", redeemRequest{Code: pa.Code, Name: name, PublicKey: pub, Confirm: confirm})
	if code != http.StatusOK {
		t.Fatalf("redeem: %d %s", code, b)
	}
	var ra redeemAnswer
	json.Unmarshal(b, &ra)
	code, b = api(t, r.srv, "GET", "/api/pair/result?code="+pa.Code, testToken, nil)
	var res PairResult
	json.Unmarshal(b, &res)
	if code != http.StatusOK || res.ID != ra.ID || !bytes.Equal(res.PublicKey, pub) || !bytes.Equal(res.Confirm, confirm) {
		t.Fatalf("result: %d %s", code, b)
	}
	return ra.Credential, ra.ID
}

func b64(n int, c byte) string {
	return base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{c}, n))
}

func dialAs(t *testing.T, r *testRelay, cred, path string) *websocket.Conn {
	t.Helper()
	c, code := dialStatus(t, r.srv, cred, path)
	if c == nil {
		t.Fatalf("dial %s: %d", path, code)
	}
	c.SetReadLimit(MaxFrameBytes)
	return c
}

// The relay tells a CLI its account's devices that have keys (on connect
// and when one pairs or is revoked), keeps the session keys a CLI wraps
// for them, gives each device only its own (on subscribe, and at once when
// it comes later), stores sealed envelopes as they are, and forgets a
// revoked device's keys.
func TestSessionKeysThroughTheRelay(t *testing.T) {
	r := startTestRelay(t)
	cli := dialAs(t, r, testToken, "/ws/cli")
	// The list comes when one pairs (and at once to a CLI that connects
	// while it does: the same list may come twice).
	devices := func(n int) protocol.Frame {
		t.Helper()
		for {
			if f := recvType(t, cli, protocol.FrameDevices); len(f.Devices) == n {
				return f
			}
		}
	}
	phone, phoneID := pairDevice(t, r, "phone", bytes.Repeat([]byte{1}, 32))
	if f := devices(1); f.Devices[0].ID != phoneID || f.Devices[0].Name != "phone" {
		t.Fatalf("after pairing %+v", f)
	}
	tablet, tabletID := pairDevice(t, r, "tablet", bytes.Repeat([]byte{2}, 32))
	devices(2)
	pairAs(t, r.srv, testToken, RoleDevice, "keyless") // no public key: never listed (below, after a revocation, one is left)

	// The phone follows the session before any key exists.
	app := dialAs(t, r, phone, "/ws/app")
	machine := b64(32, 5)
	wrapped := map[string]string{phoneID: b64(113, 1), tabletID: b64(113, 2)}
	send(t, cli, protocol.Frame{Type: protocol.FrameKeys, Ref: "k1", Session: a1, Machine: machine,
		Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: wrapped[phoneID]}}})
	if f := recv(t, cli); f.Type != protocol.FrameAck || f.Ref != "k1" {
		t.Fatalf("keys: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: a1})
	if f := recv(t, app); f.Type != protocol.FrameSessionKey || f.Session != a1 || f.Wrapped != wrapped[phoneID] || f.Machine != machine {
		t.Fatalf("phone's first frame %+v", f)
	}
	// An app may ask for a listed session's key.
	send(t, app, protocol.Frame{Type: protocol.FrameSessionKey, Session: a1})
	if f := recvType(t, app, protocol.FrameSessionKey); f.Wrapped != wrapped[phoneID] {
		t.Fatalf("asked: %+v", f)
	}
	send(t, app, protocol.Frame{Type: protocol.FrameSessionKey, Session: nope})
	if f := recvType(t, app, protocol.FrameError); f.Code != "not-found" {
		t.Fatalf("no such session: %+v", f)
	}
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 1)})
	recvType(t, cli, protocol.FrameAck)
	send(t, app, protocol.Frame{Type: protocol.FrameSessionKey, Session: s1})
	if f := recvType(t, app, protocol.FrameError); f.Code != "no-key" || f.Session != s1 {
		t.Fatalf("a session without a key: %+v", f)
	}
	// A key that comes later reaches the following device at once, and
	// only its own.
	tapp := dialAs(t, r, tablet, "/ws/app")
	send(t, tapp, protocol.Frame{Type: protocol.FrameSubscribe, Session: a1})
	recvType(t, tapp, protocol.FrameCaughtUp)
	send(t, cli, protocol.Frame{Type: protocol.FrameKeys, Ref: "k2", Session: a1, Machine: machine,
		Keys: []protocol.WrappedKey{{Device: tabletID, Wrapped: wrapped[tabletID]}}})
	recvType(t, cli, protocol.FrameAck)
	if f := recvType(t, tapp, protocol.FrameSessionKey); f.Wrapped != wrapped[tabletID] {
		t.Fatalf("tablet got %+v", f)
	}

	// Sealed envelopes are stored as they came, readable fields checked.
	sealed := protocol.SealedEnvelope{ID: protocol.DeriveID(a1, "x"), Time: 5, Role: protocol.RoleAgent, Turn: protocol.DeriveID(a1, "t"),
		Ev: protocol.SealedEvent{T: protocol.KindTurnEnd, Status: protocol.StatusCompleted}, Sealed: b64(200, 3)}
	raw, _ := json.Marshal(sealed)
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: []json.RawMessage{raw}})
	recvType(t, cli, protocol.FrameAck)
	if got := recvType(t, app, protocol.FrameBatch); len(got.Items) != 1 || !bytes.Equal(got.Items[0].Envelope, raw) {
		t.Fatalf("batch %+v", got)
	}

	// Revoking the tablet removes its key and tells the CLI.
	if code, b := api(t, r.srv, "POST", "/api/devices/revoke", testToken, renameRequest{Name: "tablet"}); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, b)
	}
	devices(1)
	// A CLI may ask for the list.
	send(t, cli, protocol.Frame{Type: protocol.FrameDevices, Ref: "d1"})
	if f := recvType(t, cli, protocol.FrameDevices); f.Ref != "d1" || len(f.Devices) != 1 || f.Devices[0].ID != phoneID {
		t.Fatalf("asked: %+v", f)
	}
	// A CLI that connects now hears of the phone at once.
	if f := recv(t, dialAs(t, r, testToken, "/ws/cli")); f.Type != protocol.FrameDevices || len(f.Devices) != 1 || f.Devices[0].ID != phoneID {
		t.Fatalf("a new CLI's first frame %+v", f)
	}
	if _, _, err := r.store.SessionKeyFor(t.Context(), a1, tabletID); err != ErrNoSessionKey {
		t.Fatalf("a revoked device's key: %v", err)
	}
}

func TestKeysAndSealedEnvelopesRefused(t *testing.T) {
	r := startTestRelay(t)
	_, phoneID := pairDevice(t, r, "phone", bytes.Repeat([]byte{1}, 32))
	good := protocol.SealedEnvelope{ID: protocol.DeriveID(a1, "x"), Time: 5, Role: protocol.RoleAgent, Ev: protocol.SealedEvent{T: protocol.KindText}, Sealed: b64(200, 3)}
	tests := []struct {
		name string
		f    protocol.Frame
		code string
	}{
		{"a device of no account", protocol.Frame{Type: protocol.FrameKeys, Session: a1, Machine: b64(32, 5), Keys: []protocol.WrappedKey{{Device: "nope", Wrapped: b64(113, 1)}}}, "bad-keys"},
		{"a wrapped key of another size", protocol.Frame{Type: protocol.FrameKeys, Session: a1, Machine: b64(32, 5), Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: b64(112, 1)}}}, "bad-keys"},
		{"no machine key", protocol.Frame{Type: protocol.FrameKeys, Session: a1, Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: b64(113, 1)}}}, "bad-keys"},
		{"no keys", protocol.Frame{Type: protocol.FrameKeys, Session: a1, Machine: b64(32, 5)}, "bad-keys"},
		{"a session that is not a UUID", protocol.Frame{Type: protocol.FrameKeys, Session: "s", Machine: b64(32, 5), Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: b64(113, 1)}}}, "bad-keys"},
	}
	mod := func(f func(*protocol.SealedEnvelope)) json.RawMessage {
		e := good
		f(&e)
		b, _ := json.Marshal(e)
		return b
	}
	for _, tc := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"sealed with a bad id", mod(func(e *protocol.SealedEnvelope) { e.ID = "X" })},
		{"sealed not base64url", mod(func(e *protocol.SealedEnvelope) { e.Sealed = strings.Repeat("+", 300) })},
		{"sealed too short", mod(func(e *protocol.SealedEnvelope) { e.Sealed = "AAAA" })},
		{"status on a text", mod(func(e *protocol.SealedEnvelope) { e.Ev.Status = protocol.StatusCompleted })},
		{"unknown kind", mod(func(e *protocol.SealedEnvelope) { e.Ev.T = "secret" })},
		{"a readable field more", json.RawMessage(strings.Replace(string(mod(func(*protocol.SealedEnvelope) {})), `"ev":`, `"text":"leak","ev":`, 1))},
	} {
		tests = append(tests, struct {
			name string
			f    protocol.Frame
			code string
		}{tc.name, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: []json.RawMessage{tc.raw}}, "bad-envelope"})
	}
	// Sealed blobs: only where a blob may be, within the bound.
	text, _ := json.Marshal(good)
	end := good
	end.Ev.T = protocol.KindToolCallEnd
	endRaw, _ := json.Marshal(end)
	tests = append(tests,
		struct {
			name string
			f    protocol.Frame
			code string
		}{"a sealed text's blob", protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: []json.RawMessage{text}, Blobs: []protocol.Blob{{ID: good.ID, Data: make([]byte, 40)}}}, "bad-envelope"},
		struct {
			name string
			f    protocol.Frame
			code string
		}{"a sealed result over its bound", protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: []json.RawMessage{endRaw}, Blobs: []protocol.Blob{{ID: good.ID, Data: make([]byte, protocol.MaxFullResultBytes+protocol.SealOverheadMax+1)}}}, "bad-envelope"},
	)
	cli := dialAs(t, r, testToken, "/ws/cli")
	recvType(t, cli, protocol.FrameDevices)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			send(t, cli, tc.f)
			if f := recvType(t, cli, protocol.FrameError, protocol.FrameAck); f.Type != protocol.FrameError || f.Code != tc.code {
				t.Fatalf("%+v", f)
			}
		})
	}
	// A sealed result's blob within its bound is kept.
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: []json.RawMessage{endRaw}, Blobs: []protocol.Blob{{ID: good.ID, Data: make([]byte, 100)}}})
	if f := recvType(t, cli, protocol.FrameError, protocol.FrameAck); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	if b, err := r.store.Blob(t.Context(), a1, good.ID); err != nil || len(b) != 100 {
		t.Fatalf("blob %d, %v", len(b), err)
	}
}

// A key a CLI wraps for a device reaches every app connection of that
// device at once, whatever it shows (the list, another session), not only
// one that follows the session: a device trusted while a session runs
// opens it without loading again. Another device's app gets nothing.
func TestSessionKeyReachesEveryAppOfTheDevice(t *testing.T) {
	r := startTestRelay(t)
	cli := dialAs(t, r, testToken, "/ws/cli")
	phone, phoneID := pairDevice(t, r, "phone", bytes.Repeat([]byte{1}, 32))
	tablet, _ := pairDevice(t, r, "tablet", bytes.Repeat([]byte{2}, 32))
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, 0, 1)})
	recvType(t, cli, protocol.FrameAck)

	lister := dialAs(t, r, phone, "/ws/app") // on the list
	send(t, lister, protocol.Frame{Type: protocol.FrameList})
	recvType(t, lister, protocol.FrameSessions)
	elsewhere := dialAs(t, r, phone, "/ws/app") // on another session
	send(t, elsewhere, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1})
	recvType(t, elsewhere, protocol.FrameCaughtUp)
	other := dialAs(t, r, tablet, "/ws/app")
	send(t, other, protocol.Frame{Type: protocol.FrameList})
	recvType(t, other, protocol.FrameSessions)

	machine, wrapped := b64(32, 5), b64(113, 1)
	send(t, cli, protocol.Frame{Type: protocol.FrameKeys, Ref: "k1", Session: a1, Machine: machine,
		Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: wrapped}}})
	recvType(t, cli, protocol.FrameAck)
	for name, app := range map[string]*websocket.Conn{"listing": lister, "following another session": elsewhere} {
		if f := recvType(t, app, protocol.FrameSessionKey); f.Session != a1 || f.Wrapped != wrapped || f.Machine != machine {
			t.Fatalf("the phone's app %s got %+v", name, f)
		}
	}
	// The tablet's app: no key came before the answer to its question.
	send(t, other, protocol.Frame{Type: protocol.FrameSessionKey, Session: a1})
	for {
		f := recv(t, other)
		if f.Type == protocol.FrameSessionKey {
			t.Fatalf("the tablet got the phone's key: %+v", f)
		}
		if f.Type == protocol.FrameError {
			if f.Code != "no-key" {
				t.Fatalf("the tablet's question: %+v", f)
			}
			break
		}
	}
}

// Two relays on one PostgreSQL: a key a CLI on one stores reaches the
// device's listing app on the other at once.
func TestNodesSessionKeyReachesApps(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startNode(t, url), startNode(t, url)
	phone, phoneID := pairDevice(t, a, "phone", bytes.Repeat([]byte{1}, 32))
	app := dialAs(t, b, phone, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	recvType(t, app, protocol.FrameSessions)

	cli := dialAs(t, a, testToken, "/ws/cli")
	machine, wrapped := b64(32, 5), b64(113, 1)
	send(t, cli, protocol.Frame{Type: protocol.FrameKeys, Ref: "k1", Session: a1, Machine: machine,
		Keys: []protocol.WrappedKey{{Device: phoneID, Wrapped: wrapped}}})
	recvType(t, cli, protocol.FrameAck)
	if f := recvType(t, app, protocol.FrameSessionKey); f.Session != a1 || f.Wrapped != wrapped || f.Machine != machine {
		t.Fatalf("the phone's app on the other relay got %+v", f)
	}
}
