package apiclient

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/coder/websocket"
)

// phoneConn is a paired device's app connection, for tests.
type phoneConn struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialPhone(t *testing.T, r *relayProc, cred string) *phoneConn {
	t.Helper()
	ws, _, err := websocket.Dial(context.Background(), "ws://"+r.addr+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &phoneConn{t: t, ws: ws}
}

func (p *phoneConn) send(f protocol.Frame) {
	f.V = protocol.FrameVersion
	b, _ := json.Marshal(f)
	if err := p.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		p.t.Fatal(err)
	}
}

// next reads until a frame that cond takes.
func (p *phoneConn) next(what string, cond func(protocol.Frame) bool) protocol.Frame {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		_, b, err := p.ws.Read(ctx)
		if err != nil {
			p.t.Fatalf("waiting for %s: %v", what, err)
		}
		var f protocol.Frame
		json.Unmarshal(b, &f)
		if cond(f) {
			return f
		}
	}
}

// The session's description, its live deltas and the app's commands are
// sealed too: the relay lists only the mode, status and request ids, the
// device opens the rest; a command reaches the CLI only sealed by the
// device, unchanged, with its id and kind as the relay saw them.
func TestSealedAnnounceLiveAndCommands(t *testing.T) {
	r := newRelay(t)
	phone, _ := seal.GenerateKeyPair()
	phoneID, phoneCred := pairTestDeviceCred(t, r, "phone", phone.Public().Bytes())
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(t.TempDir(), machine)
	kr.Trust(TrustedDevice{ID: phoneID, Name: "phone", PublicKey: phone.Public().Bytes()})
	box, _ := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr})
	defer box.Close()
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	defer rc.finish(t)

	box.Append(context.Background(), sessA, envs(sessA, 0, 1))
	info := `{"cwd":"/home/dev/secret-project","title":"rewrite the secret parser","machine":"laptop","mode":"remote","status":"waiting-for-permission","error":"claude: cannot open /home/dev/secret-project/x","permissions":[{"id":"req-1","tool":"Bash","input":{"command":"rm -rf /home/dev/secret-project/build"}}]}`
	rc.cl.Announce(sessA, json.RawMessage(info))

	app := dialPhone(t, r, phoneCred)
	app.send(protocol.Frame{Type: protocol.FrameList})
	f := app.next("the session listed", func(f protocol.Frame) bool {
		return (f.Type == protocol.FrameSessions || f.Type == protocol.FrameSession) && len(f.Sessions) == 1 && strings.Contains(string(f.Sessions[0].Info), "sealed")
	})
	listed := string(f.Sessions[0].Info)
	for _, s := range []string{"secret", "laptop", "rm -rf", "cannot open"} {
		if strings.Contains(listed, s) {
			t.Errorf("the relay lists %q: %s", s, listed)
		}
	}
	var readable struct {
		Mode, Status, Sealed string
		Permissions          []struct{ ID string }
	}
	json.Unmarshal(f.Sessions[0].Info, &readable)
	if readable.Mode != "remote" || readable.Status != "waiting-for-permission" || len(readable.Permissions) != 1 || readable.Permissions[0].ID != "req-1" {
		t.Errorf("readable info %s", listed)
	}
	app.send(protocol.Frame{Type: protocol.FrameSubscribe, Session: sessA})
	sk := app.next("the session key", func(f protocol.Frame) bool { return f.Type == protocol.FrameSessionKey })
	mk, _ := ecdh.X25519().NewPublicKey(machine.PublicKey().Bytes())
	key, err := seal.UnwrapKey(phone, mk, sessA, sk.Wrapped)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := key.Open(seal.AD{Session: sessA, ID: "announce", Direction: seal.FromMachine}, readable.Sealed)
	if err != nil || !strings.Contains(string(sum), "rewrite the secret parser") || !strings.Contains(string(sum), "rm -rf") {
		t.Fatalf("sealed summary %s, %v", sum, err)
	}

	// Live deltas (not stored: they reach an app that follows the session,
	// which it does once caught up).
	app.next("caught up", func(f protocol.Frame) bool { return f.Type == protocol.FrameCaughtUp })
	rc.cl.Live(sessA, json.RawMessage(`{"delta":"the secret answer"}`))
	live := app.next("a live frame", func(f protocol.Frame) bool { return f.Type == protocol.FrameLive })
	var lp struct{ Sealed string }
	json.Unmarshal(live.Payload, &lp)
	if strings.Contains(string(live.Payload), "secret") {
		t.Errorf("live payload readable: %s", live.Payload)
	}
	if d, err := key.Open(seal.AD{Session: sessA, ID: "live", Direction: seal.FromMachine}, lp.Sealed); err != nil || string(d) != `{"delta":"the secret answer"}` {
		t.Errorf("live opens to %s, %v", d, err)
	}

	// Commands: sealed ones reach the CLI; others are refused, and said so.
	sealCmd := func(c protocol.Command, id, kind string) protocol.Command {
		b, _ := json.Marshal(c)
		s, err := key.Seal(seal.AD{Session: sessA, ID: id, Direction: seal.FromDevice}, b)
		if err != nil {
			t.Fatal(err)
		}
		return protocol.Command{ID: id, Kind: kind, Sealed: s}
	}
	good := protocol.Command{ID: protocol.DeriveID("cmd", "1"), Kind: protocol.CommandPrompt, Text: "run the secret tests"}
	app.send(protocol.Frame{Type: protocol.FrameCommand, Session: sessA, Command: &protocol.Command{ID: protocol.DeriveID("cmd", "0"), Kind: protocol.CommandPrompt, Text: "rm -rf ~"}})
	moved := sealCmd(protocol.Command{ID: protocol.DeriveID("cmd", "2"), Kind: protocol.CommandPrompt, Text: "x"}, protocol.DeriveID("cmd", "2"), protocol.CommandPrompt)
	moved.ID = protocol.DeriveID("cmd", "3") // the relay gives it another id
	app.send(protocol.Frame{Type: protocol.FrameCommand, Session: sessA, Command: &moved})
	otherKind := sealCmd(protocol.Command{ID: protocol.DeriveID("cmd", "4"), Kind: protocol.CommandPrompt, Text: "x"}, protocol.DeriveID("cmd", "4"), protocol.CommandAbort)
	app.send(protocol.Frame{Type: protocol.FrameCommand, Session: sessA, Command: &otherKind})
	sc := sealCmd(good, good.ID, good.Kind)
	app.send(protocol.Frame{Type: protocol.FrameCommand, Session: sessA, Command: &sc})
	select {
	case in := <-rc.cl.Commands():
		if in.Command.ID != good.ID || in.Command.Text != good.Text || in.Command.Sealed != "" {
			t.Fatalf("the CLI got %+v", in.Command)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sealed command did not arrive")
	}
	// The plaintext one the relay refuses itself (it knows the session is
	// sealed) and neither stores nor hands on; were it handed on, the CLI
	// would refuse it.
	if f := app.next("the plaintext command refused", func(f protocol.Frame) bool {
		return f.Type == protocol.FrameError && f.Command != nil && f.Command.ID == protocol.DeriveID("cmd", "0")
	}); f.Code != "not-sealed" {
		t.Errorf("the relay answered a plaintext command with %+v", f)
	}
	if _, err := rc.cl.openCommand(sessA, protocol.Command{ID: protocol.DeriveID("cmd", "0"), Kind: protocol.CommandPrompt, Text: "rm -rf ~"}); !errors.Is(err, errUnsealed) {
		t.Errorf("the CLI takes a plaintext command to a sealed session: %v", err)
	}
	for _, id := range []string{moved.ID, otherKind.ID} {
		st := app.next("command "+id+" rejected", func(f protocol.Frame) bool {
			return f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == id && f.Status == protocol.StatusRejected
		})
		if st.Message == "" {
			t.Errorf("rejected without a reason: %+v", st)
		}
	}
	rc.cl.Reply(context.Background(), sessA, good.ID, true, "")
}

// A sealed command for a session this machine has no key of is refused,
// and makes no key (the relay names the session).
func TestSealedCommandForUnknownSessionMakesNoKey(t *testing.T) {
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	dir := t.TempDir()
	kr, _ := OpenKeyring(dir, machine)
	_, err := kr.OpenCommand(sessB, protocol.Command{ID: protocol.DeriveID("c", "1"), Kind: protocol.CommandPrompt, Sealed: strings.Repeat("A", 60)})
	if err == nil {
		t.Fatal("a sealed command for an unknown session was taken")
	}
	if ss, _ := kr.Sessions(); len(ss) != 0 {
		t.Fatalf("keys made: %v", ss)
	}
}
