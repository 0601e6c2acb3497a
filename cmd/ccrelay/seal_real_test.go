package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/coder/websocket"
)

// trustedDevice pairs a device with a key at the relay (as its token) and
// makes the machine of state trust it, as `ccrelay pair` does once the
// confirmation matches; it returns the device's credential.
func trustedDevice(t *testing.T, base, token, state string, device *seal.KeyPair) (cred string, kr *apiclient.Keyring) {
	t.Helper()
	var red struct{ ID, Credential, Name string }
	red.ID, red.Credential = testutil.PairDevice(t, base, token, "phone", device.Public().Bytes())
	red.Name = "phone"
	kr, err := openKeyring(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := kr.Trust(apiclient.TrustedDevice{ID: red.ID, Name: red.Name, PublicKey: device.Public().Bytes()}); err != nil {
		t.Fatal(err)
	}
	return red.Credential, kr
}

// The real Claude Code in remote mode, driven from a paired phone: the
// phone's prompt travels sealed, Claude answers and reads a file, and
// neither the relay's database nor any frame the relay sent the phone
// holds the prompt, the answer or the file's line; the phone opens them
// all.
func TestRealClaudeRemoteSealed(t *testing.T) {
	const (
		prompt = "tell me the secret of the orchard please"
		answer = "The orchard's secret is tangerine-42, kept quietly."
		line   = "secret file line: magenta-papaya-993"
	)
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	e := claudetest.New(t)
	os.WriteFile(filepath.Join(e.Project, "notes.txt"), []byte(line+"\n"), 0o644)
	e.API.SetRules(
		fakeapi.Rule{LastUserContains: "orchard", AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Text(answer),
			fakeapi.ToolUse("Read", map[string]any{"file_path": filepath.Join(e.Project, "notes.txt")})}},
		fakeapi.Rule{AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("Read it.")}})

	data, state := t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	phone, _ := seal.GenerateKeyPair()
	cred, kr := trustedDevice(t, base, token, state, phone)

	const session = "5ea1ed00-0000-4000-8000-000000000001"
	cmd := exec.Command(binary, "--remote", "--session", session, "--claude", e.Claude, "--state", state, "--relay", base, "--relay-token", token)
	cmd.Dir = e.Project
	cmd.Env = e.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	app, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.CloseNow()
	app.SetReadLimit(16 << 20)
	var frames [][]byte // every frame the relay sent the phone
	send := func(f protocol.Frame) {
		f.V = protocol.FrameVersion
		b, _ := json.Marshal(f)
		if err := app.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() protocol.Frame {
		_, b, err := app.Read(ctx)
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		frames = append(frames, b)
		var f protocol.Frame
		json.Unmarshal(b, &f)
		return f
	}
	send(protocol.Frame{Type: protocol.FrameList})
	for listed := false; !listed; {
		for _, s := range read().Sessions {
			listed = listed || s.ID == session
		}
	}
	send(protocol.Frame{Type: protocol.FrameSubscribe, Session: session})
	var key *seal.SessionKey
	for key == nil {
		if f := read(); f.Type == protocol.FrameSessionKey && f.Session == session {
			if f.Machine != kr.MachinePublic() {
				t.Fatalf("the relay names machine %s", f.Machine)
			}
			if key, err = seal.UnwrapKey(phone, kr.Machine().Public(), session, f.Wrapped); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := protocol.DeriveID(session, "prompt-1")
	plain, _ := json.Marshal(protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: prompt})
	sealed, err := key.Seal(seal.AD{Session: session, ID: id, Direction: seal.FromDevice}, plain)
	if err != nil {
		t.Fatal(err)
	}
	send(protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Sealed: sealed}})
	var opened []string
	for ended := false; !ended; {
		f := read()
		if f.Type == protocol.FrameStatus && f.Status == protocol.StatusRejected {
			t.Fatalf("prompt rejected: %s", f.Message)
		}
		for _, it := range f.Items {
			h, err := protocol.DecodeSealed(it.Envelope)
			if err != nil {
				t.Fatalf("a plaintext envelope reached the phone: %s", it.Envelope)
			}
			p, err := key.Open(seal.AD{Session: session, ID: h.ID, Direction: seal.FromMachine}, h.Sealed)
			if err != nil {
				t.Fatal(err)
			}
			opened = append(opened, string(p))
			ended = ended || h.Ev.T == protocol.KindTurnEnd
		}
	}
	all := strings.Join(opened, "\n")
	for _, s := range []string{prompt, "tangerine-42", "magenta-papaya-993"} {
		if !strings.Contains(all, s) {
			t.Fatalf("the phone did not open %q from what it got:\n%s", s, all)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	var disk []byte
	for _, name := range []string{"relay.db", "relay.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(data, name))
		disk = append(disk, b...)
	}
	seen := bytes.Join(frames, nil)
	for _, s := range []string{prompt, "tangerine-42", "magenta-papaya-993", "notes.txt", e.Project} {
		if bytes.Contains(disk, []byte(s)) {
			t.Errorf("the relay's database holds %q", s)
		}
		if bytes.Contains(seen, []byte(s)) {
			t.Errorf("a frame to the phone holds %q", s)
		}
	}
}
