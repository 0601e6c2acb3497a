package localca

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// verify says whether the folder's certificate, trusted through the
// authority's file alone, is good for host at now.
func verify(t *testing.T, f Files, host string, now time.Time) error {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no certificate in the authority's file")
	}
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// The certificate covers the LAN address, the machine's name and
// 127.0.0.1 alike (a certificate for the LAN name only made pair fail at
// 127.0.0.1), and nothing else; the keys are private to the user.
func TestEnsureCoversLANAndLoopback(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	now := time.Now()
	f, made, err := Ensure(dir, []string{"192.168.1.9", "laptop.local", "127.0.0.1", "localhost"}, now)
	if err != nil || !made {
		t.Fatalf("Ensure: %v, made %v", err, made)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"192.168.1.9", true}, {"laptop.local", true}, {"127.0.0.1", true}, {"localhost", true},
		{"192.168.1.10", false}, {"evil.example", false},
	} {
		if err := verify(t, f, tc.host, now); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.host, err, tc.ok)
		}
	}
	for _, p := range []string{f.CAKey, f.Key} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v", p, fi.Mode(), err)
		}
	}
	fp, err := Fingerprint(f.CA)
	if err != nil || len(fp) != 32*3-1 || strings.Count(fp, ":") != 31 {
		t.Errorf("fingerprint %q, %v", fp, err)
	}
}

// A second run keeps the authority (the phone trusts it once) and the
// certificate while it covers the hosts; a new address, or a certificate
// near its end, gets a new certificate from the same authority.
func TestEnsureKeepsAuthority(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	hosts := []string{"192.168.1.9", "127.0.0.1"}
	f, _, err := Ensure(dir, hosts, now)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(f.CA)
	cert, _ := os.ReadFile(f.Cert)
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }

	if _, made, err := Ensure(dir, hosts, now.Add(time.Hour)); err != nil || made || read(f.Cert) != string(cert) {
		t.Fatalf("second run with the same hosts: made %v, %v", made, err)
	}
	if _, made, err := Ensure(dir, []string{"10.0.0.4", "127.0.0.1"}, now); err != nil || !made {
		t.Fatalf("a new address: made %v, %v", made, err)
	}
	if err := verify(t, f, "10.0.0.4", now); err != nil {
		t.Errorf("new address: %v", err)
	}
	later := now.Add(certLife - Renew + time.Hour)
	if _, made, err := Ensure(dir, []string{"10.0.0.4", "127.0.0.1"}, later); err != nil || !made {
		t.Fatalf("near its end: made %v, %v", made, err)
	}
	if err := verify(t, f, "127.0.0.1", later.Add(Renew)); err != nil {
		t.Errorf("renewed certificate: %v", err)
	}
	if read(f.CA) != string(ca) {
		t.Error("the authority changed: the phone would have to trust a new one")
	}
}

// A broken authority is refused with what to do, not replaced behind the
// phone's back.
func TestEnsureBrokenAuthority(t *testing.T) {
	dir := t.TempDir()
	f, _, err := Ensure(dir, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f.CAKey, []byte("not a key"), 0o600)
	if _, _, err := Ensure(dir, []string{"10.0.0.4"}, time.Now()); err == nil || !strings.Contains(err.Error(), "remove") {
		t.Fatalf("broken key: %v", err)
	}
	if _, _, err := Ensure(dir, nil, time.Now()); err == nil {
		t.Fatal("no hosts: no error")
	}
}
