package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCA is a certificate authority made in the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ccrelay test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a certificate for 127.0.0.1 (and localhost) and its key to
// dir as name.crt and name.key, and returns its paths and the base64
// SHA-256 of its public key (what Chromium's
// --ignore-certificate-errors-spki-list takes).
func (ca *testCA) issue(t *testing.T, dir, name string, serial int64) (certFile, keyFile, spki string) {
	t.Helper()
	der, key, spki := ca.leaf(t, serial, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	return certFile, keyFile, spki
}

// leaf makes a server certificate for names and ips signed by ca, and
// returns it (DER), its key and the base64 SHA-256 of its public key.
func (ca *testCA) leaf(t *testing.T, serial int64, names []string, ips []net.IP) ([]byte, *ecdsa.PrivateKey, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "relay"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: ips, DNSNames: names,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	sum := sha256.Sum256(pub)
	return der, key, base64.StdEncoding.EncodeToString(sum[:])
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startServeTLS runs serve with args and returns the https base URL and
// the relay token it printed.
func startServeTLS(t *testing.T, data string, args ...string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, args...)...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	re := regexp.MustCompile(`app:\s+(https://[0-9.:]+)/#token=([0-9a-f]+)`)
	sc := bufio.NewScanner(out)
	var base, token string
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			base, token = m[1], m[2]
			break
		}
	}
	go io.Copy(io.Discard, out)
	if base == "" {
		t.Fatal("serve printed no https app URL")
	}
	return cmd, base, token
}

// serve --tls-cert/--tls-key speaks HTTPS with the certificate, and reads
// it again on SIGHUP (a renewal needs no restart).
func TestServeTLSReloadOnHUP(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certFile, keyFile, _ := ca.issue(t, dir, "relay", 100)
	cmd, base, token := startServeTLS(t, filepath.Join(dir, "data"), "--tls-cert", certFile, "--tls-key", keyFile)
	serial := func() int64 {
		// A new connection each time, so each sees the current certificate.
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}, DisableKeepAlives: true}}
		req, _ := http.NewRequest("GET", base+"/health", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("health: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 100 {
		t.Fatalf("serial %d", got)
	}
	ca.issue(t, dir, "relay", 101) // renewed in place
	cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(waitLimit)
	for serial() != 101 {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not picked up after SIGHUP")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A broken renewal keeps the working certificate.
	writeFile(t, certFile, []byte("not a certificate"))
	cmd.Process.Signal(syscall.SIGHUP)
	if got := serial(); got != 101 {
		t.Errorf("after a broken renewal: serial %d", got)
	}
}

// Bad HTTPS input ends serve with one clear line, before the data folder
// is created.
func TestServeBadTLSInput(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certA, _, _ := ca.issue(t, dir, "a", 1)
	_, keyB, _ := ca.issue(t, dir, "b", 2)
	closed := func() string { // an address nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String() + "/directory"
	}()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing certificate", []string{"--tls-cert", filepath.Join(dir, "nope.crt"), "--tls-key", keyB}, "no such file"},
		{"key of another certificate", []string{"--tls-cert", certA, "--tls-key", keyB}, "does not match"},
		{"cert without key", []string{"--tls-cert", certA}, "together"},
		{"domain that does not resolve", []string{"--acme", "relay.example.invalid"}, "does not resolve"},
		{"ACME server unreachable", []string{"--acme", "localhost", "--acme-directory", closed}, "cannot be reached"},
		{"not a domain", []string{"--acme", "127.0.0.1"}, "domain name"},
		{"bad proxy", []string{"--behind-proxy", "proxy.example"}, "not an IP address"},
		{"bad public URL", []string{"--public-url", "relay.example.com"}, "https://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(binary, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, tc.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatal("serve started")
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("stderr %q, want one line with %q", stderr.String(), tc.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("the data folder was created")
			}
		})
	}
}
