package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/internal/localca"
)

// spkiOf is the base64 SHA-256 of the public key of the first certificate
// of a PEM file (what Chromium's --ignore-certificate-errors-spki-list
// takes: the phone trusting the authority, for a browser made in a test).
func spkiOf(t *testing.T, certFile string) string {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", certFile)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// testLANAddress is the address setup picks for the phone: this machine's
// first network address (or, on a machine with none, one given with
// --lan-address that is not 127.0.0.1 all the same).
func testLANAddress(t *testing.T) (string, []string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String(), nil
		}
	}
	return "127.0.0.2", []string{"--lan-address", "127.0.0.2"}
}

// Without Tailscale, setup serves the relay on the LAN with a certificate
// of this machine's own authority that covers the LAN address and
// 127.0.0.1: it says how to trust the authority on the phone (the file
// and its fingerprint), the phone pairs at the LAN address, and this
// machine's ccrelay reaches the relay at https://127.0.0.1 trusting the
// remembered authority, with no flag and no SSL_CERT_FILE.
func TestSetupLAN(t *testing.T) {
	r := newSetupRig(t, "")
	addr, args := testLANAddress(t)
	s := r.startSetup(t, args...)
	m := s.waitFor(t, pairLinkRe, time.Minute)
	port := strconv.Itoa(r.port)
	phoneURL := "https://" + net.JoinHostPort(addr, port)
	if !strings.HasPrefix(m[1], phoneURL+"/#pair=") {
		t.Errorf("the link is not on the LAN address %s: %s", phoneURL, m[1])
	}
	data := filepath.Join(r.home, ".local", "share", "ccrelay")
	files := localca.Paths(data)
	fp, err := localca.Fingerprint(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	out := s.output()
	for _, want := range []string{"Tailscale is not installed", "through the LAN at " + phoneURL, files.CA, fp, "Certificate Trust Settings", "Install a certificate > CA certificate"} {
		if !strings.Contains(out, want) {
			t.Errorf("setup's output lacks %q:\n%s", want, out)
		}
	}
	// The certificate covers both the LAN address and 127.0.0.1.
	caPEM, _ := os.ReadFile(files.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	certPEM, _ := os.ReadFile(files.Cert)
	blk, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{addr, "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("the certificate does not cover %s: %v", host, err)
		}
	}

	// The phone trusts the authority, opens the link and pairs.
	ctx := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", spkiOf(t, files.Cert)))
	must(t, ctx, phone(), chromedp.Navigate(m[1]))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	click(t, ctx, ".pair-form button")
	if err := s.wait(t, time.Minute); err != nil {
		t.Fatalf("setup: %v\n%s", err, s.output())
	}
	if !strings.Contains(s.output(), "its key is confirmed") {
		t.Errorf("setup did not confirm the phone's key:\n%s", s.output())
	}
	local := "https://127.0.0.1:" + port
	cfg, err := config.Load(filepath.Join(r.home, ".local", "state", "ccrelay"))
	if err != nil || cfg.Relay != local || cfg.CAFile != files.CA {
		t.Errorf("remembered %+v, %v; want %s with %s", cfg, err, local, files.CA)
	}
	unit, _ := os.ReadFile(filepath.Join(r.cfg, "systemd", "user", relayService.unit))
	for _, want := range []string{`"--listen" "0.0.0.0:` + port + `"`, `"--tls-cert" "` + files.Cert + `"`, `"--public-url" "` + phoneURL + `"`} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %s:\n%s", want, unit)
		}
	}
	// This machine's commands trust the remembered authority.
	res := runEnv(t, r.env, "status")
	if res.code != 0 || !strings.Contains(res.stdout, "sessions: relayed to "+local) || !strings.Contains(res.stdout, "relay: answers") {
		t.Errorf("status: %+v", res)
	}
}
