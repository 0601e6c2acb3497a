package apiclient

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// pairTestDevice pairs a device with a key through the relay's HTTP API
// (as the relay's token) and returns its credential id.
func pairTestDevice(t *testing.T, r *relayProc, name string, pub []byte) string {
	id, _ := pairTestDeviceCred(t, r, name, pub)
	return id
}

// pairTestDeviceCred is pairTestDevice that also returns the credential.
func pairTestDeviceCred(t *testing.T, r *relayProc, name string, pub []byte) (string, string) {
	return testutil.PairDevice(t, "http://"+r.addr, token, name, pub)
}

// A machine that trusts a device seals what it sends: the relay's database
// holds none of the session's words, and the device opens every envelope
// and blob with the key the machine wrapped for it, exactly as sent. A
// device the machine does not trust gets no key.
func TestSealedSessionThroughRelay(t *testing.T) {
	r := newRelay(t)
	phone, _ := seal.GenerateKeyPair()
	stranger, _ := seal.GenerateKeyPair()
	phoneID := pairTestDevice(t, r, "phone", phone.Public().Bytes())
	strangerID := pairTestDevice(t, r, "stranger", stranger.Public().Bytes())

	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	state := t.TempDir()
	kr, err := OpenKeyring(state, machine)
	if err != nil {
		t.Fatal(err)
	}
	if kr.Sealing(sessA) {
		t.Fatal("sealing with no trusted device")
	}
	if err := kr.Trust(TrustedDevice{ID: phoneID, Name: "phone", PublicKey: phone.Public().Bytes()}); err != nil {
		t.Fatal(err)
	}
	box, err := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()

	secret := "the secret words of this session, longer than sixteen bytes"
	full := strings.Repeat("a full result line that only the phone may read\n", 200)
	preview := full[:protocol.MaxResultBytes]
	envs := envs(sessA, 0, 3)
	envs[1].Ev.Text = secret
	envs = append(envs, protocol.Envelope{ID: protocol.DeriveID(sessA, "end"), Time: 9, Role: protocol.RoleAgent, Turn: protocol.DeriveID(sessA, "turn"),
		Ev: protocol.Event{T: protocol.KindToolCallEnd, Call: "toolu_1", Result: &preview, Truncated: true, Full: int64(len(full))}, Blob: []byte(full)})
	if err := box.Append(context.Background(), sessA, envs); err != nil {
		t.Fatal(err)
	}
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	rc.finish(t)

	// Nothing of the session is readable on the relay's disk.
	r.halt()
	for _, name := range []string{"relay.db", "relay.db-wal"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(r.db), name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, s := range []string{secret, "a full result line", "message 0"} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q", name, s)
			}
		}
	}
	r.start()

	// The phone opens everything; the stranger has no key.
	wrapped, machinePub, err := r.st.SessionKeyFor(context.Background(), sessA, phoneID)
	if err != nil {
		t.Fatal(err)
	}
	if machinePub != kr.MachinePublic() {
		t.Fatalf("the relay names machine %s, want %s", machinePub, kr.MachinePublic())
	}
	key, err := seal.UnwrapKey(phone, machine.PublicKey(), sessA, wrapped)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.st.SessionKeyFor(context.Background(), sessA, strangerID); err == nil {
		t.Error("a device the machine does not trust got a key")
	}
	rows, err := r.st.Read(context.Background(), sessA, 0, 100)
	if err != nil || len(rows) != len(envs) {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for i, row := range rows {
		h, err := protocol.DecodeSealed(row.Body)
		if err != nil {
			t.Fatalf("row %d is not sealed: %v", i, err)
		}
		plain, err := key.Open(seal.AD{Session: sessA, ID: h.ID, Direction: seal.FromMachine}, h.Sealed)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		want, _ := envs[i].AppendJSON(nil)
		plain, c, ok := protocol.SplitChain(plain)
		prev := ""
		if i > 0 {
			prev = envs[i-1].ID
		}
		if !ok || c != (protocol.Chain{N: int64(i + 1), Prev: prev}) {
			t.Errorf("row %d's sealed chain: %+v %v", i, c, ok)
		}
		if !bytes.Equal(plain, want) {
			t.Errorf("row %d opens to %s, want %s", i, plain, want)
		}
		if h.ID != envs[i].ID || h.Ev.T != envs[i].Ev.T || h.Time != envs[i].Time {
			t.Errorf("row %d readable fields %+v", i, h)
		}
	}
	blob, err := r.st.Blob(context.Background(), sessA, envs[3].ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := key.OpenBytes(seal.AD{Session: sessA, ID: envs[3].ID + "/blob", Direction: seal.FromMachine}, blob)
	if err != nil || string(got) != full {
		t.Fatalf("blob opens to %d bytes, %v", len(got), err)
	}
	// The same envelope moved to another position does not open there.
	if _, err := key.Open(seal.AD{Session: sessA, ID: envs[0].ID, Direction: seal.FromMachine}, mustSealed(t, rows[1].Body)); err == nil {
		t.Error("an envelope opened under another envelope's id")
	}
}

func mustSealed(t *testing.T, raw []byte) string {
	t.Helper()
	h, err := protocol.DecodeSealed(raw)
	if err != nil {
		t.Fatal(err)
	}
	return h.Sealed
}

// A device trusted after a session was sent gets that session's key (it
// sees the history), from a client that was idle meanwhile.
func TestNewlyTrustedDeviceGetsHistory(t *testing.T) {
	r := newRelay(t)
	first, _ := seal.GenerateKeyPair()
	later, _ := seal.GenerateKeyPair()
	firstID := pairTestDevice(t, r, "first", first.Public().Bytes())
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(t.TempDir(), machine)
	kr.Trust(TrustedDevice{ID: firstID, Name: "first", PublicKey: first.Public().Bytes()})
	box, _ := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr})
	defer box.Close()
	box.Append(context.Background(), sessA, envs(sessA, 0, 2))
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	defer rc.finish(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rc.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	laterID := pairTestDevice(t, r, "later", later.Public().Bytes())
	if err := kr.Trust(TrustedDevice{ID: laterID, Name: "later", PublicKey: later.Public().Bytes()}); err != nil {
		t.Fatal(err)
	}
	for {
		wrapped, _, err := r.st.SessionKeyFor(ctx, sessA, laterID)
		if err == nil {
			if _, err := seal.UnwrapKey(later, machine.PublicKey(), sessA, wrapped); err != nil {
				t.Fatal(err)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatal(fmt.Errorf("the later device got no key: %w", err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A device revoked on the relay gets no key for a session that starts
// after, though this machine still lists it as trusted.
func TestRevokedDeviceGetsNoNewKeys(t *testing.T) {
	r := newRelay(t)
	kept, _ := seal.GenerateKeyPair()
	lost, _ := seal.GenerateKeyPair()
	keptID := pairTestDevice(t, r, "kept", kept.Public().Bytes())
	lostID := pairTestDevice(t, r, "lost", lost.Public().Bytes())
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(t.TempDir(), machine)
	kr.Trust(TrustedDevice{ID: keptID, Name: "kept", PublicKey: kept.Public().Bytes()})
	kr.Trust(TrustedDevice{ID: lostID, Name: "lost", PublicKey: lost.Public().Bytes()})
	req, _ := http.NewRequest("POST", "http://"+r.addr+"/api/devices/revoke", strings.NewReader(`{"name":"lost"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	resp.Body.Close()
	box, _ := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr})
	defer box.Close()
	box.Append(context.Background(), sessB, envs(sessB, 0, 2))
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	rc.finish(t)
	if _, _, err := r.st.SessionKeyFor(context.Background(), sessB, keptID); err != nil {
		t.Fatalf("the kept device: %v", err)
	}
	if _, _, err := r.st.SessionKeyFor(context.Background(), sessB, lostID); err == nil {
		t.Fatal("the revoked device got a key for a new session")
	}
}
