package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/localca"
)

// An authority an earlier ccrelay setup made has no name constraints: a
// phone that trusts it trusts its key for every site. setup keeps it (the
// phone trusts it) but says so, and how to replace it; a new authority
// needs no such word.
func TestSetupLANSaysOldAuthorityIsUnconstrained(t *testing.T) {
	old := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ccrelay local CA (before name constraints)"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := localca.Paths(old)
	os.WriteFile(files.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(files.CAKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)

	for _, tc := range []struct {
		name, data string
		note       bool
	}{
		{"an authority of an earlier setup", old, true},
		{"a new authority", filepath.Join(t.TempDir(), "data"), false},
	} {
		r, err := lanReach(setupFlags{lanAddress: "192.168.1.9", port: DefaultPort}, tc.data)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		said := strings.Contains(r.phoneStep, "without name constraints")
		if said != tc.note {
			t.Errorf("%s: said it has no name constraints: %v, want %v:\n%s", tc.name, said, tc.note, r.phoneStep)
		}
		if said && (!strings.Contains(r.phoneStep, files.CA) || !strings.Contains(r.phoneStep, files.CAKey)) {
			t.Errorf("%s: does not say which files to remove:\n%s", tc.name, r.phoneStep)
		}
	}
}
