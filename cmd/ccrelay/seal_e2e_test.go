package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/coder/websocket"
)

// pairWaiting runs `ccrelay pair` (which waits for the device) and returns
// the link it prints, and a func that waits for it to end.
func pairWaiting(t *testing.T, base, data, state string) (link string, wait func() result) {
	t.Helper()
	cmd := exec.Command(binary, "pair", "--relay", base, "--data", data, "--state", state)
	stdout, _ := cmd.StdoutPipe()
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	var so strings.Builder
	sc := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`open:\s*$`)
	for sc.Scan() {
		line := sc.Text()
		so.WriteString(line + "\n")
		if re.MatchString(line) && sc.Scan() {
			link = strings.TrimSpace(sc.Text())
			so.WriteString(sc.Text() + "\n")
			break
		}
	}
	if link == "" {
		t.Fatalf("pair printed no link: %s %s", so.String(), se.String())
	}
	done := make(chan struct{})
	go func() {
		b, _ := io.ReadAll(stdout)
		so.Write(b)
		close(done)
	}()
	return link, func() result {
		<-done
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{code: code, stdout: so.String(), stderr: se.String()}
	}
}

// redeemAsDevice does what the app does with a pairing link: it checks
// nothing, sends its public key and its confirmation tag (made with the
// link's secret, or with swap's key in place of the machine's: a relay
// that swapped keys), and returns its credential id.
func redeemAsDevice(t *testing.T, base, link string, device *seal.KeyPair, swap *ecdh.PublicKey) string {
	id, _ := redeemAsDeviceCred(t, base, link, device, swap)
	return id
}

// redeemAsDeviceCred is redeemAsDevice that also returns the credential.
func redeemAsDeviceCred(t *testing.T, base, link string, device *seal.KeyPair, swap *ecdh.PublicKey) (string, string) {
	t.Helper()
	p, status, a := redeemLink(t, base, link, device, swap)
	if status != http.StatusOK || !bytes.Equal(a.MachineKey, p.machineKey) {
		t.Fatalf("redeem: %d, machine key %x (link %x)", status, a.MachineKey, p.machineKey)
	}
	// It accepts the machine key it checked, as the app does (with a
	// swapped key the machine fails the pairing first: no answer).
	if swap == nil {
		accepted, _ := base64.RawURLEncoding.DecodeString(seal.ConfirmTag(p.confirm, seal.RoleDeviceAccepted, p.machine, device.Public()))
		if st, b := answerPairing(t, base, a.Credential, map[string]any{"code": p.code, "accepted": accepted}); st != http.StatusOK {
			t.Fatalf("answer: %d %s", st, b)
		}
	}
	return a.ID, a.Credential
}

// pairing is what a device takes from a pairing link.
type pairing struct {
	code       string
	machineKey []byte          // the machine key the link names
	machine    *ecdh.PublicKey // the key the device's tags are made over
	confirm    []byte          // the confirmation key of the link's secret
}

// redeemAnswer is the relay's answer to a redemption.
type redeemAnswer struct {
	ID         string `json:"id"`
	Credential string `json:"credential"`
	MachineKey []byte `json:"machineKey"`
}

// redeemLink redeems the code of a pairing link as the app does: it sends
// the device's public key and its confirmation tag, made with the link's
// secret over the link's machine key (or over swap, when not nil: a relay
// that swapped keys). It returns what the link holds, and the relay's
// answer with its status.
func redeemLink(t *testing.T, base, link string, device *seal.KeyPair, swap *ecdh.PublicKey) (pairing, int, redeemAnswer) {
	t.Helper()
	m := regexp.MustCompile(`#pair=([0-9A-Z]+)\.([A-Za-z0-9_-]{43})\.([A-Za-z0-9_-]{22})$`).FindStringSubmatch(link)
	if m == nil {
		t.Fatalf("link %q", link)
	}
	p := pairing{code: m[1]}
	p.machineKey, _ = base64.RawURLEncoding.DecodeString(m[2])
	var err error
	if p.machine, err = ecdh.X25519().NewPublicKey(p.machineKey); err != nil {
		t.Fatal(err)
	}
	if swap != nil {
		p.machine = swap
	}
	if _, p.confirm, err = seal.PairingKeys(m[3]); err != nil {
		t.Fatal(err)
	}
	tag, _ := base64.RawURLEncoding.DecodeString(seal.ConfirmTag(p.confirm, seal.RoleDevice, p.machine, device.Public()))
	body, _ := json.Marshal(map[string]any{"code": p.code, "name": "phone", "publicKey": device.Public().Bytes(), "confirm": tag})
	resp, err := http.Post(base+"/api/pair/redeem", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a redeemAnswer
	json.NewDecoder(resp.Body).Decode(&a)
	return p, resp.StatusCode, a
}

// answerPairing posts a device's answer to its pairing (POST
// /api/pair/answer) with its credential.
func answerPairing(t *testing.T, base, cred string, body map[string]any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", base+"/api/pair/answer", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// Pairing confirms the phone's key; then a corpus session replayed to the
// relay (`ccrelay replay --to`, as any machine sends) is sealed: the
// relay's database holds none of its prompts, tool output lines over 16
// bytes or file paths, and the phone opens every stored envelope to
// exactly what `replay --format jsonl` prints.
func TestSealedReplayAfterPairing(t *testing.T) {
	data, state := t.TempDir(), t.TempDir()
	serve, base, token := startServe(t, data)
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()

	phone, _ := seal.GenerateKeyPair()
	link, wait := pairWaiting(t, base, data, state)
	phoneID, phoneCred := redeemAsDeviceCred(t, base, link, phone, nil)
	res := wait()
	if res.code != 0 || !strings.Contains(res.stdout, "its key is confirmed") {
		t.Fatalf("pair: %+v", res)
	}
	var trusted []apiclient.TrustedDevice
	b, err := os.ReadFile(filepath.Join(state, apiclient.TrustedDevicesFile))
	if err != nil {
		t.Fatal(err)
	}
	if json.Unmarshal(b, &trusted); len(trusted) != 1 || trusted[0].ID != phoneID || !bytes.Equal(trusted[0].PublicKey, phone.Public().Bytes()) {
		t.Fatalf("trusted devices: %s", b)
	}

	// A public session with prompts, many tool calls and cut results.
	transcript := corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
	session := strings.TrimSuffix(filepath.Base(transcript), ".jsonl")
	if r := run(t, "replay", "-q", "--to", base, "--relay-token", token, "--state", state, transcript); r.code != 0 {
		t.Fatalf("replay --to: %+v", r)
	}
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", transcript).stdout, "\n"), "\n")

	// What must not be readable on the relay.
	var secrets []string
	for _, l := range want {
		var e protocol.Envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		add := func(s string) {
			for _, line := range strings.Split(s, "\n") {
				if line = strings.TrimSpace(line); len(line) > 16 {
					secrets = append(secrets, line)
				}
			}
		}
		add(e.Ev.Text)
		if e.Ev.Result != nil {
			add(*e.Ev.Result)
		}
		var args map[string]any
		json.Unmarshal(e.Ev.Args, &args)
		for _, v := range args {
			if s, ok := v.(string); ok {
				add(s)
			}
		}
	}
	if len(secrets) < 100 {
		t.Fatalf("only %d texts to look for", len(secrets))
	}
	var disk []byte
	for _, name := range []string{"relay.db", "relay.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(data, name))
		disk = append(disk, b...)
	}
	// And every frame the relay sends the phone: the list and the whole
	// session.
	frames := captureSession(t, base, phoneCred, session, len(want))
	for _, s := range secrets {
		if bytes.Contains(disk, []byte(s)) {
			t.Errorf("the relay's database holds %q", s)
		}
		if bytes.Contains(frames, []byte(s)) {
			t.Errorf("a frame to the phone holds %q", s)
		}
	}

	// The phone opens every stored envelope.
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wrapped, machinePub, err := st.SessionKeyFor(context.Background(), session, phoneID)
	if err != nil {
		t.Fatal(err)
	}
	mk, _ := base64.RawURLEncoding.DecodeString(machinePub)
	machine, _ := ecdh.X25519().NewPublicKey(mk)
	key, err := seal.UnwrapKey(phone, machine, session, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Read(context.Background(), session, 0, 10000)
	if err != nil || len(rows) != len(want) {
		t.Fatalf("%d stored, %d replayed, %v", len(rows), len(want), err)
	}
	for i, row := range rows {
		h, err := protocol.DecodeSealed(row.Body)
		if err != nil {
			t.Fatalf("row %d is not sealed: %v\n%s", i, err, row.Body)
		}
		plain, err := key.Open(seal.AD{Session: session, ID: h.ID, Direction: seal.FromMachine}, h.Sealed)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		plain, c, _ := protocol.SplitChain(plain)
		if c.N != int64(i+1) || (i > 0 && c.Prev != rows[i-1].ID) {
			t.Errorf("row %d's sealed chain: %+v", i, c)
		}
		if string(plain) != want[i] {
			t.Errorf("row %d opens to\n%s\nwant\n%s", i, plain, want[i])
		}
	}
}

// A relay that swaps keys at pairing is caught: the device's confirmation
// was made for another machine key than this machine's, so ccrelay pair
// trusts nothing and says so.
func TestPairingCatchesSwappedKey(t *testing.T) {
	data, state := t.TempDir(), t.TempDir()
	serve, base, token := startServe(t, data)
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	phone, _ := seal.GenerateKeyPair()
	mallory, _ := seal.GenerateKeyPair()
	link, wait := pairWaiting(t, base, data, state)
	redeemAsDevice(t, base, link, phone, mallory.Public())
	res := wait()
	if res.code == 0 || !strings.Contains(res.stderr, "changed a key") {
		t.Fatalf("pair with a swapped key: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(state, apiclient.TrustedDevicesFile)); !os.IsNotExist(err) {
		t.Fatalf("a device was trusted: %v", err)
	}
	if names := credentialNames(t, base, token); slices.Contains(names, "phone") {
		t.Fatalf("the relay keeps the failed pairing's credential: %v", names)
	}
}

// Without a paired device, sessions do not go to a relay on another
// machine unless --plaintext says so; a relay on this machine takes them.
func TestPlaintextOnlyToThisMachine(t *testing.T) {
	state := t.TempDir()
	transcript := corpus + smallSession
	r := run(t, "replay", "-q", "--to", "http://relay.example.invalid:8707", "--relay-token", "x", "--state", state, transcript)
	if r.code == 0 || !strings.Contains(r.stderr, "--plaintext") || !strings.Contains(r.stderr, "unencrypted") {
		t.Fatalf("replay to another machine without a device: %+v", r)
	}
	for _, u := range []string{"http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1", "https://relay.example.invalid"} {
		if got, want := isLoopbackURL(u), !strings.Contains(u, "example"); got != want {
			t.Errorf("isLoopbackURL(%q) = %v", u, got)
		}
	}
}

// captureSession lists the sessions and follows session from its start as
// a device (credential cred) until n envelopes came, and returns every
// frame the relay sent.
func captureSession(t *testing.T, base, cred, session string, n int) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + cred}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	for _, f := range []protocol.Frame{{V: protocol.FrameVersion, Type: protocol.FrameList}, {V: protocol.FrameVersion, Type: protocol.FrameSubscribe, Session: session}} {
		b, _ := json.Marshal(f)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	var all []byte
	for got := 0; got < n; {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %d of %d envelopes: %v", got, n, err)
		}
		all = append(all, b...)
		var f protocol.Frame
		json.Unmarshal(b, &f)
		got += len(f.Items)
	}
	return all
}
