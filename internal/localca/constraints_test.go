package localca

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// signWith makes a leaf for host with the folder's authority, as anyone
// holding its key could: what a phone that trusts the authority accepts
// of it is what the key is worth to a thief.
func signWith(t *testing.T, f Files, host string, eku x509.ExtKeyUsage, now time.Time) *x509.Certificate {
	t.Helper()
	ca, caKey, err := loadCA(f)
	if err != nil {
		t.Fatal(err)
	}
	key, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: ca.SerialNumber, Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// The authority a phone trusts can vouch only for a LAN's addresses and
// names, and for the hosts it was made for: with its key stolen, it cannot
// be used to impersonate a bank or any public address to the phone, nor
// for anything but a TLS server.
func TestAuthorityIsNameConstrained(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Now()
	f, _, err := Ensure(dir, []string{"198.51.100.7", "laptop", "laptop.local", "127.0.0.1", "localhost"}, now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := readCert(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, tc := range []struct {
		host string
		eku  x509.ExtKeyUsage
		ok   bool
	}{
		{"192.168.7.20", x509.ExtKeyUsageServerAuth, true},
		{"10.1.2.3", x509.ExtKeyUsageServerAuth, true},
		{"172.20.0.1", x509.ExtKeyUsageServerAuth, true},
		{"100.101.102.103", x509.ExtKeyUsageServerAuth, true}, // a tailnet's (CGNAT) address
		{"fd00::1", x509.ExtKeyUsageServerAuth, true},
		{"127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"localhost", x509.ExtKeyUsageServerAuth, true},
		{"printer.local", x509.ExtKeyUsageServerAuth, true},
		{"nas.home.arpa", x509.ExtKeyUsageServerAuth, true},
		{"198.51.100.7", x509.ExtKeyUsageServerAuth, true}, // made for it
		{"laptop", x509.ExtKeyUsageServerAuth, true},       // made for it
		{"198.51.100.8", x509.ExtKeyUsageServerAuth, false},
		{"8.8.8.8", x509.ExtKeyUsageServerAuth, false},
		{"2001:db8::1", x509.ExtKeyUsageServerAuth, false},
		{"bank.example.com", x509.ExtKeyUsageServerAuth, false},
		{"accounts.google.com", x509.ExtKeyUsageServerAuth, false},
		{"printer.local", x509.ExtKeyUsageClientAuth, false},
		{"printer.local", x509.ExtKeyUsageCodeSigning, false},
	} {
		leaf := signWith(t, f, tc.host, tc.eku, now)
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{tc.eku}})
		if (err == nil) != tc.ok {
			t.Errorf("a certificate for %s (key usage %v): %v, want ok=%v", tc.host, tc.eku, err, tc.ok)
		}
	}
	if !ca.PermittedDNSDomainsCritical {
		t.Error("the name constraints are not critical: a phone that does not know them would ignore them")
	}
}

// An authority made before may not sign a new public address: Ensure
// says what to do rather than make a certificate the phone refuses. A new
// LAN address, and a new name of the machine's beside it, still go.
func TestEnsureOutsideTheAuthority(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Now()
	if _, _, err := Ensure(dir, []string{"192.168.1.9", "laptop", "127.0.0.1"}, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Ensure(dir, []string{"203.0.113.5", "127.0.0.1"}, now); err == nil || !strings.Contains(err.Error(), "remove") {
		t.Fatalf("a public address the authority was not made for: %v", err)
	}
	f, made, err := Ensure(dir, []string{"10.0.0.4", "newname", "newname.local", "127.0.0.1"}, now)
	if err != nil || !made {
		t.Fatalf("a new LAN address: %v, made %v", err, made)
	}
	for _, h := range []string{"10.0.0.4", "newname.local", "127.0.0.1"} {
		if err := verify(t, f, h, now); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	// The name it may not sign is left out, and the certificate stays
	// current for the same hosts.
	if _, made, err := Ensure(dir, []string{"10.0.0.4", "newname", "newname.local", "127.0.0.1"}, now); err != nil || made {
		t.Fatalf("the same hosts again: made %v, %v", made, err)
	}
}
