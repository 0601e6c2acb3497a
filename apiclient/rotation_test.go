package apiclient

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// TestRevocationRotatesSessionKey: a running client whose relay revokes a
// device it shared a session's key with starts a new key epoch for that
// session at once, wrapped only for the device that remains. The revoked
// device, holding the key it was given and the relay's whole store, opens
// nothing sent after; the device that remains opens everything, before
// and after, and a command it seals under the old key is refused.
func TestRevocationRotatesSessionKey(t *testing.T) {
	r := newRelay(t)
	kept, _ := seal.GenerateKeyPair()
	lost, _ := seal.GenerateKeyPair()
	keptID := pairTestDevice(t, r, "kept", kept.Public().Bytes())
	lostID := pairTestDevice(t, r, "lost", lost.Public().Bytes())
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, _ := OpenKeyring(t.TempDir(), machine)
	kr.Trust(TrustedDevice{ID: keptID, Name: "kept", PublicKey: kept.Public().Bytes()})
	kr.Trust(TrustedDevice{ID: lostID, Name: "lost", PublicKey: lost.Public().Bytes()})
	box, _ := OpenOutboxWith(t.TempDir(), OutboxOptions{Sealer: kr})
	defer box.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := envs(sessA, 0, 6)
	box.Append(ctx, sessA, all[:3])
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, Keyring: kr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, box)
	defer rc.finish(t)
	if err := rc.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// What the lost device took before it was lost.
	wrapped, _, err := r.st.SessionKeyFor(ctx, sessA, lostID)
	if err != nil {
		t.Fatal(err)
	}
	stolen, err := seal.UnwrapKeys(lost, machine.PublicKey(), sessA, wrapped)
	if err != nil || len(stolen) != 1 {
		t.Fatalf("the lost device's keys: %d, %v", len(stolen), err)
	}
	req, _ := http.NewRequest("POST", "http://"+r.addr+"/api/devices/revoke", strings.NewReader(`{"name":"lost"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	resp.Body.Close()
	// The device that remains gets the new epoch without anything more
	// being sent: the client rotates when the relay's device list changes.
	var keys []*seal.SessionKey
	for {
		w, _, err := r.st.SessionKeyFor(ctx, sessA, keptID)
		if err == nil {
			if keys, err = seal.UnwrapKeys(kept, machine.PublicKey(), sessA, w); err != nil {
				t.Fatal(err)
			}
			if len(keys) == 2 {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatal(fmt.Errorf("the kept device got no new epoch: %d keys, %v", len(keys), err))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, epoch, _ := kr.Current(sessA); epoch != 1 {
		t.Fatalf("the machine seals under epoch %d, want 1", epoch)
	}
	box.Append(ctx, sessA, all[3:])
	if err := rc.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := r.st.Read(ctx, sessA, 0, 100)
	if err != nil || len(rows) != len(all) {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for i, row := range rows {
		raw, err := seal.DecodeSealed(mustSealed(t, row.Body))
		if err != nil {
			t.Fatal(err)
		}
		epoch, _ := seal.Epoch(raw)
		if want := min(i/3, 1); epoch != want {
			t.Errorf("row %d sealed under epoch %d, want %d", i, epoch, want)
		}
		ad := seal.AD{Session: sessA, ID: all[i].ID, Direction: seal.FromMachine}
		if _, err := keys[epoch].OpenBytes(ad, raw); err != nil {
			t.Errorf("the kept device cannot open row %d: %v", i, err)
		}
		_, err = stolen[0].OpenBytes(ad, raw)
		if i < 3 && err != nil {
			t.Errorf("row %d, sent before the revocation, does not open under the first key: %v", i, err)
		}
		if i >= 3 && err == nil {
			t.Errorf("the revoked device opens row %d, sent after its revocation", i)
		}
	}
	// A command sealed under the retired key (the lost device could make
	// one, and a relay could hand it over) is refused; under the new one
	// it opens.
	for _, c := range []struct {
		key   *seal.SessionKey
		epoch int
		ok    bool
	}{{stolen[0], 0, false}, {keys[1], 1, true}} {
		cmd := sealedCommand(t, c.key, c.epoch, sessA)
		_, err := kr.OpenCommand(sessA, cmd)
		if (err == nil) != c.ok {
			t.Errorf("a command under epoch %d: %v", c.epoch, err)
		}
	}
}

// sealedCommand is a prompt to session sealed as a device seals it, under
// key as the session's key of epoch.
func sealedCommand(t *testing.T, key *seal.SessionKey, epoch int, session string) protocol.Command {
	t.Helper()
	id := protocol.DeriveID("rotation", fmt.Sprint(epoch))
	b, _ := json.Marshal(protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: "run the tests"})
	s, err := key.SealEpoch(epoch, seal.AD{Session: session, ID: id, Direction: seal.FromDevice}, b)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.Command{ID: id, Kind: protocol.CommandPrompt, Sealed: s}
}
