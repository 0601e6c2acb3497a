package seal

import (
	"bytes"
	"errors"
	"testing"
)

// TestSealEpoch: a value sealed under a later epoch carries it, opens only
// under that epoch's key, and cannot pass for a value of the first form.
func TestSealEpoch(t *testing.T) {
	k0, k1 := newKey(t), newKey(t)
	ad := AD{Session: testSession, ID: testEnvID, Direction: FromMachine}
	pt := []byte("after the revocation")
	s, err := k1.SealEpoch(3, ad, pt)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := DecodeSealed(s)
	if err != nil {
		t.Fatal(err)
	}
	if raw[0] != VersionEpoch || len(raw) != len(pt)+OverheadEpoch {
		t.Fatalf("header %d, %d bytes", raw[0], len(raw))
	}
	if e, err := Epoch(raw); e != 3 || err != nil {
		t.Fatalf("Epoch: %d %v", e, err)
	}
	if got, err := k1.Open(ad, s); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open: %q %v", got, err)
	}
	if _, err := k0.Open(ad, s); !errors.Is(err, ErrOpen) {
		t.Fatalf("opened under the earlier epoch's key: %v", err)
	}
	// The same bytes relabelled as the first form, or as epoch 0.
	downgraded := append([]byte{Version}, raw[3:]...)
	if _, err := k1.OpenBytes(ad, downgraded); !errors.Is(err, ErrOpen) {
		t.Fatalf("a later epoch's value opened as the first form: %v", err)
	}
	zero := bytes.Clone(raw)
	zero[1], zero[2] = 0, 0
	if _, err := k1.OpenBytes(ad, zero); !errors.Is(err, ErrMalformed) {
		t.Fatalf("epoch 0 in the second form: %v", err)
	}
	// Epoch 0 is the first form, unchanged.
	s0, _ := k0.SealEpoch(0, ad, pt)
	if raw0, _ := DecodeSealed(s0); raw0[0] != Version || len(raw0) != len(pt)+Overhead {
		t.Fatal("epoch 0 is not sealed in the first form")
	}
	if _, err := k0.SealEpoch(MaxEpochs, ad, pt); err == nil {
		t.Fatal("sealed under an epoch past MaxEpochs")
	}
}

// TestWrapKeys: a set of several keys opens to them all, in order; one key
// is WrapKey's form; a tampered set or another device's does not open.
func TestWrapKeys(t *testing.T) {
	machine, device, other := newKeyPair(t), newKeyPair(t), newKeyPair(t)
	keys := []*SessionKey{newKey(t), newKey(t), newKey(t)}
	w, err := WrapKeys(machine, device.Public(), testSession, keys)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnwrapKeys(device, machine.Public(), testSession, w)
	if err != nil || len(got) != 3 {
		t.Fatalf("UnwrapKeys: %d keys, %v", len(got), err)
	}
	for i := range keys {
		if !bytes.Equal(got[i].Bytes(), keys[i].Bytes()) {
			t.Fatalf("key %d differs", i)
		}
	}
	if _, err := UnwrapKey(device, machine.Public(), testSession, w); err == nil {
		t.Fatal("UnwrapKey took a key set")
	}
	one, _ := WrapKeys(machine, device.Public(), testSession, keys[:1])
	if k, err := UnwrapKey(device, machine.Public(), testSession, one); err != nil || !bytes.Equal(k.Bytes(), keys[0].Bytes()) {
		t.Fatalf("one key is not WrapKey's form: %v", err)
	}
	if ks, err := UnwrapKeys(device, machine.Public(), testSession, one); err != nil || len(ks) != 1 {
		t.Fatalf("UnwrapKeys of one key: %v", err)
	}
	raw, _ := b64.DecodeString(w)
	for _, i := range []int{0, 1, 40, len(raw) - 40, len(raw) - 1} {
		b := bytes.Clone(raw)
		b[i] ^= 0x80
		if _, err := UnwrapKeys(device, machine.Public(), testSession, b64.EncodeToString(b)); err == nil {
			t.Errorf("flipped byte %d: opened", i)
		}
	}
	if _, err := UnwrapKeys(other, machine.Public(), testSession, w); !errors.Is(err, ErrUnwrap) {
		t.Fatalf("another device: %v", err)
	}
	if _, err := UnwrapKeys(device, machine.Public(), "1b6a4d3e-5f1c-4a7e-9c2d-1e8f7a6b5c4d", w); !errors.Is(err, ErrUnwrap) {
		t.Fatalf("another session: %v", err)
	}
	if _, err := UnwrapKeys(device, machine.Public(), testSession, b64.EncodeToString(raw[:len(raw)-KeySize])); err == nil {
		t.Fatal("a set cut by one key opened")
	}
	if _, err := WrapKeys(machine, device.Public(), testSession, make([]*SessionKey, MaxEpochs+1)); err == nil {
		t.Fatal("wrapped more than MaxEpochs keys")
	}
}
