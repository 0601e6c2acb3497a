package apiclient

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// A sealed session's command results reach the relay with their message
// sealed: what the relay stores, passes to the app (live, and again for a
// resent command) and writes to its disk holds a neutral text and the
// status only; the device opens the message for that command's result
// alone.
// sealedResultSession is a relay, a machine's client that seals sessA
// for a paired phone, and the phone's app connection subscribed to sessA
// with the session's key.
func sealedResultSession(t *testing.T) (*relayProc, *running, *phoneConn, *seal.SessionKey) {
	t.Helper()
	r := newRelay(t)
	phone, _ := seal.GenerateKeyPair()
	phoneID, phoneCred := pairTestDeviceCred(t, r, "phone", phone.Public().Bytes())
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(t.TempDir(), machine)
	kr.Trust(TrustedDevice{ID: phoneID, Name: "phone", PublicKey: phone.Public().Bytes()})
	box, _ := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr})
	t.Cleanup(func() { box.Close() })
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	box.Append(context.Background(), sessA, envs(sessA, 0, 1))
	rc.cl.Announce(sessA, json.RawMessage(`{"mode":"remote","status":"idle"}`))

	app := dialPhone(t, r, phoneCred)
	app.send(protocol.Frame{Type: protocol.FrameList})
	app.next("the session listed", func(f protocol.Frame) bool {
		return (f.Type == protocol.FrameSessions || f.Type == protocol.FrameSession) && len(f.Sessions) == 1 && strings.Contains(string(f.Sessions[0].Info), "sealed")
	})
	app.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: sessA})
	sk := app.next("the session key", func(f protocol.Frame) bool { return f.Type == protocol.FrameSessionKey })
	mk, _ := ecdh.X25519().NewPublicKey(machine.PublicKey().Bytes())
	key, err := seal.UnwrapKey(phone, mk, sessA, sk.Wrapped)
	if err != nil {
		t.Fatal(err)
	}
	app.next("caught up", func(f protocol.Frame) bool { return f.Type == protocol.FrameCaughtUp })
	return r, rc, app, key
}

func TestSealedResultMessageNotOnRelay(t *testing.T) {
	r, rc, app, key := sealedResultSession(t)

	const marker = "/home/dev/marker-7f3a9/.codex/config.toml"
	tests := []struct {
		name    string
		ok      bool
		message string
		status  string
		sealed  bool
	}{
		{"rejected with a reason", false, "codex app-server: error loading " + marker, protocol.StatusRejected, true},
		{"done without a message", true, "", protocol.StatusDone, false},
		{"done with a message", true, "went on in " + marker, protocol.StatusDone, true},
	}
	var ids []string
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := protocol.Command{ID: protocol.DeriveID("result-cmd", tt.name), Kind: protocol.CommandPrompt, Text: "x"}
			ids = append(ids, c.ID)
			b, _ := json.Marshal(c)
			s, _ := key.Seal(seal.AD{Session: sessA, ID: c.ID, Direction: seal.FromDevice}, b)
			sent := protocol.Frame{Type: protocol.FrameCommand, Session: sessA, Command: &protocol.Command{ID: c.ID, Kind: c.Kind, Sealed: s}}
			app.send(sent)
			select {
			case <-rc.cl.Commands():
			case <-time.After(20 * time.Second):
				t.Fatal("no command")
			}
			if err := rc.cl.Reply(context.Background(), sessA, c.ID, tt.ok, tt.message); err != nil {
				t.Fatal(err)
			}
			st := app.next("the result", func(f protocol.Frame) bool {
				return f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == c.ID && f.Status == tt.status
			})
			// A resent command is answered from what the relay stored.
			app.send(sent)
			again := app.next("the stored result", func(f protocol.Frame) bool {
				return f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == c.ID && f.Status == tt.status
			})
			for _, f := range []protocol.Frame{st, again} {
				raw, _ := json.Marshal(f)
				if strings.Contains(string(raw), "marker-7f3a9") {
					t.Errorf("the relay passed the message on readable: %s", raw)
				}
				if !tt.sealed {
					if f.SealedMessage != "" || f.Message != "" {
						t.Errorf("a result without a message came with %q, %q", f.Message, f.SealedMessage)
					}
					continue
				}
				if f.Message != protocol.SealedResultMessage {
					t.Errorf("readable message %q, want the neutral %q", f.Message, protocol.SealedResultMessage)
				}
				plain, err := key.Open(seal.AD{Session: sessA, ID: protocol.ResultSealID(c.ID), Direction: seal.FromMachine}, f.SealedMessage)
				if err != nil || string(plain) != tt.message {
					t.Errorf("opened %q, %v; want %q", plain, err, tt.message)
				}
				// Bound to its command and direction: it opens for no other.
				if i > 0 {
					if _, err := key.Open(seal.AD{Session: sessA, ID: protocol.ResultSealID(ids[0]), Direction: seal.FromMachine}, f.SealedMessage); err == nil {
						t.Error("a result's message opens as another command's")
					}
				}
				for _, ad := range []seal.AD{{Session: sessA, ID: c.ID, Direction: seal.FromMachine}, {Session: sessA, ID: protocol.ResultSealID(c.ID), Direction: seal.FromDevice}} {
					if _, err := key.Open(ad, f.SealedMessage); err == nil {
						t.Errorf("a result's message opens as %+v", ad)
					}
				}
			}
		})
	}

	// Nothing of the messages on the relay's disk (the client stopped
	// first: the relay is halted as a crash, with no connection coming).
	rc.finish(t)
	r.halt()
	for _, name := range []string{"relay.db", "relay.db-wal"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(r.db), name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("marker-7f3a9")) {
			t.Errorf("%s holds a result's message", name)
		}
	}
}

// A session that is not sealed (no trusted device) keeps its results'
// messages readable, as before.
func TestPlainResultMessageReadable(t *testing.T) {
	cl := NewClient(Config{URL: "http://127.0.0.1:1", Token: token, Logger: quiet}, nil)
	f := cl.resultFrame(sessA, protocol.DeriveID("cmd", "plain"), protocol.StatusRejected, "no such request")
	if f.Message != "no such request" || f.SealedMessage != "" {
		t.Errorf("plaintext session: %q, %q", f.Message, f.SealedMessage)
	}
}

// The client's own refusal of a sealed command it opened but will not
// carry out quotes what the command asked: it goes sealed too.
func TestSealedRefusalMessageSealed(t *testing.T) {
	_, rc, app, key := sealedResultSession(t)
	defer rc.finish(t)
	// A prompt that names an agent: only a start may (Command.Validate).
	c := protocol.Command{ID: protocol.DeriveID("refused", "1"), Kind: protocol.CommandPrompt, Text: "x", Agent: "marker-4c1e-agent"}
	b, _ := json.Marshal(c)
	s, _ := key.Seal(seal.AD{Session: sessA, ID: c.ID, Direction: seal.FromDevice}, b)
	app.send(protocol.Frame{Type: protocol.FrameCommand, Session: sessA, Command: &protocol.Command{ID: c.ID, Kind: c.Kind, Sealed: s}})
	st := app.next("the refusal", func(f protocol.Frame) bool {
		return f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == c.ID && f.Status == protocol.StatusRejected
	})
	if raw, _ := json.Marshal(st); strings.Contains(string(raw), "marker-4c1e") {
		t.Errorf("the refusal reached the relay readable: %s", raw)
	}
	plain, err := key.Open(seal.AD{Session: sessA, ID: protocol.ResultSealID(c.ID), Direction: seal.FromMachine}, st.SealedMessage)
	if err != nil || !strings.Contains(string(plain), "marker-4c1e-agent") {
		t.Errorf("the refusal opens to %q, %v", plain, err)
	}
}
