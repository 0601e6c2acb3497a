package apiclient

import (
	"crypto/ecdh"
	"crypto/rand"
	"testing"

	"github.com/ccrelay/ccrelay/seal"
)

// A trusted device's name, as the relay passed it on at pairing, is kept
// without bidirectional or other control characters.
func TestTrustCleansName(t *testing.T) {
	machine, _ := ecdh.X25519().GenerateKey(rand.Reader)
	kr, err := OpenKeyring(t.TempDir(), machine)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := seal.GenerateKeyPair()
	if err := kr.Trust(TrustedDevice{ID: "d1", Name: "Ann\u202e's\u2066 phone\x1b[2J\u200f", PublicKey: dev.Public().Bytes()}); err != nil {
		t.Fatal(err)
	}
	list, err := kr.Trusted()
	if err != nil || len(list) != 1 {
		t.Fatalf("trusted %v, %v", list, err)
	}
	if got, want := list[0].Name, "Ann's phone [2J"; got != want {
		t.Errorf("name %q, want %q", got, want)
	}
}
