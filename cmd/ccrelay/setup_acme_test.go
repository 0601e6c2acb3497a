package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/seal"
)

// acmeDomain is the name the ACME tests serve; it resolves (in a mount
// namespace of their own) to a loopback address of the test's.
const acmeDomain = "relay.ccrelay.test"

// withHosts runs cmd in a mount namespace of its own where /etc/hosts
// maps domain to addr (the machine's /etc/hosts is not touched; what cmd
// starts inherits the namespace), and returns cmd changed so. Root makes
// the namespace itself; another user makes it in a user namespace.
func withHosts(t *testing.T, cmd *exec.Cmd, domain, addr string) *exec.Cmd {
	t.Helper()
	unshare, err1 := exec.LookPath("unshare")
	mount, err2 := exec.LookPath("mount")
	ns := []string{"-m", "--propagation", "private"}
	if os.Getuid() != 0 {
		ns = append([]string{"-r"}, ns...)
	}
	var err3 error
	if err1 == nil && err2 == nil {
		if out, err := exec.Command(unshare, append(ns, "true")...).CombinedOutput(); err != nil {
			err3 = fmt.Errorf("unshare %v: %v: %s", ns, err, out)
		}
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		needTool(t, "unshare and mount, for a mount namespace with its own /etc/hosts", err)
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, hosts, []byte("127.0.0.1 localhost\n"+addr+" "+domain+"\n"))
	args := append(append(ns, "sh", "-c", `"$0" --bind "$1" /etc/hosts && shift && exec "$@"`, mount, hosts, cmd.Path), cmd.Args[1:]...)
	c := exec.Command(unshare, args...)
	c.Dir, c.Env = cmd.Dir, cmd.Env
	return c
}

// needTool fails the test in CI, else skips it, for want missing (err).
func needTool(t *testing.T, want string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("the ACME tests need %s: %v", want, err)
	}
	t.Skipf("needs %s: %v", want, err)
}

// loopbackAddr is an address of 127/8 other than 127.0.0.1 where port 443
// is free, so that the relay may listen on 443 beside anything else.
func loopbackAddr(t *testing.T) string {
	t.Helper()
	var err error
	for range 20 {
		addr := fmt.Sprintf("127.%d.%d.%d", 13+rand.IntN(200), rand.IntN(256), 1+rand.IntN(254))
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort(addr, "443")); err == nil {
			ln.Close()
			return addr
		}
		if errors.Is(err, os.ErrPermission) {
			needTool(t, "port 443 (root, or sysctl net.ipv4.ip_unprivileged_port_start=443)", err)
		}
	}
	t.Fatalf("no loopback address with port 443 free: %v", err)
	return ""
}

// pemFile writes certs to a PEM file in a temporary folder.
func pemFile(t *testing.T, certs ...*x509.Certificate) string {
	t.Helper()
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	p := filepath.Join(t.TempDir(), "roots.pem")
	writeFile(t, p, b)
	return p
}

// ccrelay setup --acme end to end: setup checks the name and the ACME
// server (Pebble, in the test), writes the relay's service (the rig's
// fake systemd runs it), the relay gets its certificate from Pebble at
// the first connection, setup pairs the phone at the domain, the phone
// redeems the link over that certificate, and the relay is remembered at
// the domain.
func TestSetupACMEWithPebble(t *testing.T) {
	r := newSetupRig(t, "")
	directory, pebbleClient, root := startPebble(t)
	addr := loopbackAddr(t)
	// setup and the relay trust Pebble's server and what it issues (the
	// only change from a public server, where the system's roots do).
	srvCert := pebbleServerCert(t, directory, pebbleClient)
	r.env = append(r.env, "SSL_CERT_FILE="+pemFile(t, srvCert, root))

	cmd := exec.Command(binary, "setup", "--acme", acmeDomain, "--acme-directory", directory, "--listen", net.JoinHostPort(addr, "443"))
	cmd.Dir, cmd.Env = r.home, r.env
	s := startRun(t, withHosts(t, cmd, acmeDomain, addr))
	m := s.waitFor(t, pairLinkRe, 2*time.Minute)
	if !strings.HasPrefix(m[1], "https://"+acmeDomain+"/#pair=") {
		t.Errorf("the link is not on the domain: %s", m[1])
	}

	// The phone: the domain resolves to the relay's address, and Pebble's
	// root is the one it trusts.
	pool := x509.NewCertPool()
	pool.AddCert(root)
	var leaf *x509.Certificate
	saved := http.DefaultClient
	http.DefaultClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, VerifyConnection: func(cs tls.ConnectionState) error {
			leaf = cs.PeerCertificates[0]
			return nil
		}},
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			if a != acmeDomain+":443" {
				return nil, fmt.Errorf("the phone dials %s, not the domain", a)
			}
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(addr, "443"))
		}}}
	t.Cleanup(func() { http.DefaultClient = saved })
	phone, _ := seal.GenerateKeyPair()
	if !pairAsApp(t, "https://"+acmeDomain, m[1], phone) {
		t.Fatal("the app refused the pairing")
	}
	if err := s.wait(t, time.Minute); err != nil {
		t.Fatalf("setup: %v\n%s", err, s.output())
	}
	if leaf == nil || leaf.VerifyHostname(acmeDomain) != nil || leaf.Issuer.CommonName == "" || !strings.Contains(leaf.Issuer.CommonName, "Pebble") {
		t.Errorf("the relay's certificate is not Pebble's for %s: %+v", acmeDomain, leaf)
	}
	out := s.output()
	for _, want := range []string{"through Let's Encrypt at https://" + acmeDomain, "its key is confirmed", "Remembered https://" + acmeDomain, "\n  ccrelay\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("setup's output lacks %q:\n%s", want, out)
		}
	}
	unit, err := os.ReadFile(filepath.Join(r.cfg, "systemd", "user", relayService.unit))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"--listen" "` + addr + `:443" "--acme" "` + acmeDomain + `" "--acme-directory" "` + directory + `"`; !strings.Contains(string(unit), want) {
		t.Errorf("the unit lacks %s:\n%s", want, unit)
	}
	if ents, _ := os.ReadDir(filepath.Join(r.home, ".local", "share", "ccrelay", "acme")); len(ents) == 0 {
		t.Error("no certificate cached in the relay's data folder")
	}
	cfg, err := config.Load(filepath.Join(r.home, ".local", "state", "ccrelay"))
	if err != nil || cfg.Relay != "https://"+acmeDomain || cfg.CAFile != "" {
		t.Errorf("remembered %+v, %v", cfg, err)
	}
}

// pebbleServerCert is the certificate Pebble's own HTTPS server shows.
func pebbleServerCert(t *testing.T, directory string, c *http.Client) *x509.Certificate {
	t.Helper()
	resp, err := c.Get(directory)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0]
}
