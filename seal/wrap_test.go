package seal

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestWrapUnwrap(t *testing.T) {
	machine, device := newKeyPair(t), newKeyPair(t)
	key := newKey(t)
	w, err := WrapKey(machine, device.Public(), testSession, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != b64.EncodedLen(WrappedSize) {
		t.Fatalf("wrapped key of %d characters, want %d", len(w), b64.EncodedLen(WrappedSize))
	}
	got, err := UnwrapKey(device, machine.Public(), testSession, w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), key.Bytes()) {
		t.Fatal("unwrapped another key")
	}
	w2, _ := WrapKey(machine, device.Public(), testSession, key)
	if w2 == w {
		t.Fatal("two wraps are identical: HPKE's ephemeral key is not fresh")
	}
}

// TestWrapIsHPKE: a wrapped key is version | enc | ciphertext | tag, and the
// middle is plain RFC 9180 base mode with WrapInfo, which any HPKE
// implementation (the browser's) opens.
func TestWrapIsHPKE(t *testing.T) {
	machine, device := newKeyPair(t), newKeyPair(t)
	key := newKey(t)
	w, _ := WrapKey(machine, device.Public(), testSession, key)
	raw, _ := b64.DecodeString(w)
	if raw[0] != Version {
		t.Fatalf("version byte %d", raw[0])
	}
	sk, _ := hpke.NewDHKEMPrivateKey(device.Private())
	r, err := hpke.NewRecipient(raw[1:1+encSize], sk, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("ccrelay/session-key/v1\x00"+testSession))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := r.Open(nil, raw[1+encSize:1+encSize+KeySize+TagSize])
	if err != nil || !bytes.Equal(pt, key.Bytes()) {
		t.Fatalf("not HPKE base mode with the documented info: %v", err)
	}
}

// TestUnwrapRefuses: a wrap for another device, session or machine, a
// relay's own wrap, and every flipped byte are refused.
func TestUnwrapRefuses(t *testing.T) {
	machine, device, relay := newKeyPair(t), newKeyPair(t), newKeyPair(t)
	key := newKey(t)
	w, _ := WrapKey(machine, device.Public(), testSession, key)
	// The relay knows the device's public key and wraps a key of its own,
	// claiming the machine's name: base mode alone would accept this.
	forged, _ := WrapKey(relay, device.Public(), testSession, newKey(t))
	other := "1b6a4d3e-5f1c-4a7e-9c2d-1e8f7a6b5c4d"
	type unwrapCase struct {
		name    string
		device  *KeyPair
		machine *ecdh.PublicKey
		session string
		wrapped string
		want    error
	}
	cases := []unwrapCase{
		{"other device", relay, machine.Public(), testSession, w, ErrUnwrap},
		{"other session", device, machine.Public(), other, w, ErrUnwrap},
		{"other machine", device, relay.Public(), testSession, w, ErrUnwrap},
		{"relay's own wrap", device, machine.Public(), testSession, forged, ErrUnwrap},
		{"truncated", device, machine.Public(), testSession, w[:len(w)-1], ErrMalformed},
		{"longer", device, machine.Public(), testSession, w + "A", ErrMalformed},
		{"empty", device, machine.Public(), testSession, "", ErrMalformed},
	}
	raw, _ := b64.DecodeString(w)
	for i := range raw {
		b := bytes.Clone(raw)
		b[i] ^= 0x80
		want := ErrUnwrap
		if i == 0 {
			want = ErrVersion
		}
		cases = append(cases, unwrapCase{fmt.Sprintf("flipped byte %d", i), device, machine.Public(), testSession, b64.EncodeToString(b), want})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := UnwrapKey(c.device, c.machine, c.session, c.wrapped)
			if !errors.Is(err, c.want) || k != nil {
				t.Fatalf("UnwrapKey: %v, want %v", err, c.want)
			}
		})
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hpkeVector is one RFC 9180 base-mode test vector (sequence 0 only), in
// the RFC's JSON field names. testdata/rfc9180-base.json holds A.1.1
// (AES-128-GCM) and the JSON's entry for ccrelay's suite (mode 0, kem
// 0x0020, kdf 0x0001, aead 0x0002), which the RFC's text does not print;
// cmd/ccrelay/seal_browser_test.go runs seal.js over the same file.
type hpkeVector struct {
	Name         string `json:"name"`
	AEAD         uint16 `json:"aead_id"`
	Info         string `json:"info"`
	IkmE         string `json:"ikmE"`
	IkmR         string `json:"ikmR"`
	SkRm         string `json:"skRm"`
	PkRm         string `json:"pkRm"`
	Enc          string `json:"enc"`
	SharedSecret string `json:"shared_secret"`
	Key          string `json:"key"`
	BaseNonce    string `json:"base_nonce"`
	Encryptions  []struct {
		AAD string `json:"aad"`
		PT  string `json:"pt"`
		CT  string `json:"ct"`
	} `json:"encryptions"`
	Exports []struct {
		Context string `json:"exporter_context"`
		L       int    `json:"L"`
		Value   string `json:"exported_value"`
	} `json:"exports"`
}

// TestRFC9180Vectors checks the suite this package uses against the RFC's
// vectors on the recipient side (Go's crypto/hpke makes its ephemeral keys
// itself, so the sender side is checked in the browser test, where seal.js
// derives them from ikmE). The AES-256-GCM vector runs with the package's
// own suite values.
func TestRFC9180Vectors(t *testing.T) {
	b, err := os.ReadFile("testdata/rfc9180-base.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []hpkeVector
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) != 2 {
		t.Fatalf("%d vectors, want A.1.1 and the AES-256-GCM one", len(vectors))
	}
	if hpkeKEM.ID() != 0x0020 || hpkeKDF.ID() != 0x0001 || hpkeAEAD.ID() != 0x0002 {
		t.Fatalf("suite is %#04x/%#04x/%#04x, want 0x0020/0x0001/0x0002", hpkeKEM.ID(), hpkeKDF.ID(), hpkeAEAD.ID())
	}
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			aead := hpke.AES128GCM()
			if v.AEAD == hpkeAEAD.ID() {
				aead = hpkeAEAD
			}
			if aead.ID() != v.AEAD {
				t.Fatalf("aead %#04x", v.AEAD)
			}
			sk, err := hpkeKEM.NewPrivateKey(mustHex(t, v.SkRm))
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(sk.PublicKey().Bytes()); got != v.PkRm {
				t.Fatalf("pkRm %s, want %s", got, v.PkRm)
			}
			derived, err := hpkeKEM.DeriveKeyPair(mustHex(t, v.IkmR))
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(derived.PublicKey().Bytes()); got != v.PkRm {
				t.Fatalf("DeriveKeyPair(ikmR) gives %s, want %s", got, v.PkRm)
			}
			r, err := hpke.NewRecipient(mustHex(t, v.Enc), sk, hpkeKDF, aead, mustHex(t, v.Info))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range v.Encryptions {
				pt, err := r.Open(mustHex(t, e.AAD), mustHex(t, e.CT))
				if err != nil || hex.EncodeToString(pt) != e.PT {
					t.Fatalf("open: %x %v", pt, err)
				}
			}
			for _, e := range v.Exports {
				got, err := r.Export(string(mustHex(t, e.Context)), e.L)
				if err != nil || hex.EncodeToString(got) != e.Value {
					t.Errorf("export %q: %x %v, want %s", e.Context, got, err, e.Value)
				}
			}
		})
	}
}
