package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/internal/config"
)

// issueFor writes a certificate for names only (no IP address), as
// `mkcert laptop.lan` makes, and its key; it returns their paths.
func (ca *testCA) issueFor(t *testing.T, dir string, names ...string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: names,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "name.crt"), filepath.Join(dir, "name.key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	return certFile, keyFile
}

// pair says in plain words why it cannot reach the relay, and what to do:
// a certificate this machine does not trust, a certificate for a name used
// with an IP address, nothing listening, a URL without its scheme. Before,
// each printed Go's raw error (x509: …, dial tcp …: connection refused,
// unsupported protocol scheme). With --ca the relay is reached, and the CA
// file is remembered with it: status, with no flag, reaches it too.
func TestPairSaysWhyRelayUnreachable(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	writeFile(t, caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	cert, key, _ := ca.issue(t, dir, "relay", 2)
	data := t.TempDir()
	_, base, _ := startServeTLS(t, data, "--tls-cert", cert, "--tls-key", key)
	nameCert, nameKey := ca.issueFor(t, t.TempDir(), "laptop.lan")
	_, nameBase, _ := startServeTLS(t, t.TempDir(), "--tls-cert", nameCert, "--tls-key", nameKey)
	_, namePort, _ := net.SplitHostPort(strings.TrimPrefix(nameBase, "https://"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	env := []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"untrusted certificate", []string{"--relay", base, "--data", data},
			[]string{"cannot reach the relay at " + base, "not trusted by this machine", "--ca FILE", "SSL_CERT_FILE"}},
		{"a name's certificate used with 127.0.0.1", []string{"--relay", nameBase, "--ca", caFile, "--data", data},
			[]string{"certificate is for laptop.lan, not for 127.0.0.1", "--relay https://laptop.lan:" + namePort, "mkcert laptop.lan 127.0.0.1"}},
		{"nothing listens", []string{"--relay", "http://" + closed, "--data", data},
			[]string{"connection refused", "nothing listens at " + closed, "is the relay running"}},
		{"no scheme", []string{"--relay", "127.0.0.1:8707", "--data", data},
			[]string{"give it with its scheme, e.g. https://127.0.0.1:8707"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			res := runEnv(t, env, append([]string{"pair", "--no-wait", "--state", state}, tc.args...)...)
			if res.code == 0 {
				t.Fatalf("pair succeeded: %+v", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr %q\nwant it to say %q", res.stderr, w)
				}
			}
			for _, raw := range []string{"x509:", "tls:", "dial tcp", "unsupported protocol scheme"} {
				if strings.Contains(res.stderr, raw) {
					t.Errorf("stderr %q: Go's raw error (%s)", res.stderr, raw)
				}
			}
			if c, _ := config.Load(state); c.Relay != "" {
				t.Errorf("a relay that was not reached is remembered: %+v", c)
			}
		})
	}

	// With --ca the relay is reached and remembered with the CA file.
	state := t.TempDir()
	res := runEnv(t, env, "pair", "--no-wait", "--state", state, "--relay", base, "--ca", caFile, "--data", data)
	if res.code != 0 || !strings.Contains(res.stdout, "#pair=") {
		t.Fatalf("pair --ca: %+v", res)
	}
	if c, err := config.Load(state); err != nil || c.Relay != base || c.CAFile != caFile {
		t.Fatalf("remembered %+v, %v; want %s with %s", c, err, base, caFile)
	}
	res = runEnv(t, env, "status", "--state", state, "--data", data)
	if !strings.Contains(res.stdout, "relayed to "+base+" (from the relay remembered") || !strings.Contains(res.stdout, "relay: answers") ||
		!strings.Contains(res.stdout, "credential: the token of the relay on this machine") {
		t.Errorf("status with the remembered CA: %+v", res)
	}
}

// sessions says why it cannot reach the relay in the same words as pair,
// and goes to the remembered relay without --relay.
func TestSessionsSaysWhyRelayUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing listens", []string{"--relay", "http://" + closed}, "cannot reach the relay at http://" + closed + ": connection refused: nothing listens"},
		{"no scheme", []string{"--relay", closed}, "give it with its scheme, e.g. https://" + closed},
	} {
		res := runEnv(t, env, append([]string{"sessions", "ls", "--relay-token", "t"}, tc.args...)...)
		if res.code == 0 || !strings.Contains(res.stderr, tc.want) || strings.Contains(res.stderr, "dial tcp") {
			t.Errorf("%s: %+v\nwant %q", tc.name, res, tc.want)
		}
	}
	// The remembered relay of the default state folder.
	if err := config.Remember(filepath.Join(home, ".local", "state", "ccrelay"), "http://"+closed, ""); err != nil {
		t.Fatal(err)
	}
	res := runEnv(t, env, "sessions", "ls", "--relay-token", "t")
	if res.code == 0 || !strings.Contains(res.stderr, "cannot reach the relay at http://"+closed) {
		t.Errorf("sessions ls with a remembered relay: %+v", res)
	}
}

// sessions with no --relay and no token flag, on the relay's machine,
// lists the sessions of the relay at the default address with its token
// (the token is chosen for the relay in use once that is known: chosen
// before, for no relay, it was refused as meant for a relay elsewhere).
func TestSessionsDefaultRelay(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, ".local", "share", "ccrelay")
	srv, base, _ := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	// The relay listens on a free port: it is this machine's remembered relay.
	if err := config.Remember(filepath.Join(home, ".local", "state", "ccrelay"), base, ""); err != nil {
		t.Fatal(err)
	}
	res := runEnv(t, env, "sessions", "ls")
	if res.code != 0 {
		t.Fatalf("sessions ls with no flag: %+v", res)
	}
}

// replay --to says at once (within the 10 s a relay has to answer) that a
// relay at an https URL which takes the connection and then never answers
// cannot be reached, and why: a relay whose machine went away after the
// upgrade, or a relay or proxy that is stuck. Without the fix only a
// failure to connect was said: replay waited silently for the reply to
// its first frame (30 s), then connected again, silently, for as long as
// the relay took connections (and a relay gone for good took the 10 s of
// a failed connection more before the first word: 40 s).
func TestReplayToSaysWhenRelayDoesNotAnswer(t *testing.T) {
	var mu sync.Mutex
	var held []*websocket.Conn
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		held = append(held, ws) // never read: no pong, no reply
		mu.Unlock()
		<-r.Context().Done()
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.CloseNow()
		}
	}()
	dir := t.TempDir()
	certFile, tok := filepath.Join(dir, "relay.pem"), filepath.Join(dir, "token")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "replay", "--format", "jsonl", "--to", srv.URL, "--relay-token-file", tok, "--state", t.TempDir(),
		corpus+"/public/claude-code-log/test/test_data/sidechain.jsonl")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "SSL_CERT_FILE=" + certFile}
	errs := watchStderr(t, cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	errs.waitFor(t, "cannot reach the relay at "+srv.URL+": it took the connection but did not answer within 10s")
	t.Logf("said after %v:\n%s", time.Since(start).Round(time.Millisecond), strings.Join(errs.all, "\n"))
}

// replay --to the relay that ccrelay pair (or login) remembered with --ca
// trusts that authority, as every other command does, and a --to without
// its scheme says how to write it at once. Without the fix replay --to
// did neither: it waited its 5 minutes on a certificate error it told the
// user to fix with a flag replay does not take, or on a URL it could not
// use.
func TestReplayToTrustsRememberedCA(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	writeFile(t, caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	cert, key, _ := ca.issue(t, dir, "relay", 2)
	data := t.TempDir()
	_, base, _ := startServeTLS(t, data, "--tls-cert", cert, "--tls-key", key)
	state := t.TempDir()
	env := []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	if res := runEnv(t, env, "pair", "--no-wait", "--state", state, "--relay", base, "--ca", caFile, "--data", data); res.code != 0 {
		t.Fatalf("pair --ca: %+v", res)
	}
	session := corpus + "/public/claude-code-log/test/test_data/sidechain.jsonl"
	for _, tc := range []struct {
		name, to string
		code     int
		want     string
	}{
		{"the remembered relay", base, 0, "sent 9 envelopes"},
		{"no scheme", strings.TrimPrefix(base, "https://"), 1, "--to: relay URL \"" + strings.TrimPrefix(base, "https://") + "\": give it with its scheme, e.g. https://" + strings.TrimPrefix(base, "https://")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "replay", "--format", "jsonl", "--to", tc.to, "--relay-token-file", filepath.Join(data, "token"), "--state", state, session)
			cmd.Env = env
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still running after a minute:\n%s", stderr.String())
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d (%v), stderr:\n%s\nwant exit %d saying %q", code, err, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// A relay behind a proxy (Caddy, nginx, tailscale serve) that is down is
// answered for by the proxy: 502 Bad Gateway. pair, status and sessions say
// the relay behind the proxy does not answer, not that the relay refused or
// that the address may be wrong, and give no proxy's error page. Without
// the fix: "relay refused (502 Bad Gateway): <html>…", "something answers,
// but not as a relay".
func TestSaysRelayBehindProxyIsDown(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
	}))
	defer proxy.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runEnv(t, []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}, "pair", "--no-wait", "--state", t.TempDir(), "--relay", proxy.URL, "--relay-token-file", tok)
	want := "cannot reach the relay at " + proxy.URL + ": the proxy in front of it answered 502 Bad Gateway: the relay behind it does not answer"
	if res.code == 0 || !strings.Contains(res.stderr, want) || !strings.Contains(res.stderr, "is ccrelay serve running") {
		t.Fatalf("pair: %+v\nwant it to say %q and the next step", res, want)
	}
	if strings.Contains(res.stderr, "<html>") || strings.Contains(res.stderr, "relay refused") {
		t.Errorf("pair said %q: the proxy's page, or a refusal by the relay", res.stderr)
	}
	env := []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	res = runEnv(t, env, "status", "--state", t.TempDir(), "--relay", proxy.URL)
	if !strings.Contains(res.stdout, "relay: does not answer: the proxy in front of it answered 502 Bad Gateway") {
		t.Errorf("status: %+v", res)
	}
	res = runEnv(t, env, "sessions", "ls", "--relay", proxy.URL, "--relay-token-file", tok)
	if res.code == 0 || !strings.Contains(res.stderr, want) || strings.Contains(res.stderr, "<html>") {
		t.Errorf("sessions ls: %+v\nwant it to say %q", res, want)
	}
}
