package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
)

// startPebble runs Let's Encrypt's ACME test server in the test, on
// 127.0.0.1 over TLS, accepting every challenge (PEBBLE_VA_ALWAYS_VALID:
// nothing here can reach the relay the way a CA on the Internet would). It
// returns the directory URL, a client that trusts the server, and the root
// that signs what it issues.
func startPebble(t *testing.T) (string, *http.Client, *x509.Certificate) {
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", "1")
	logger := log.New(io.Discard, "", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
	validator := va.New(logger, 5002, 5001, false, "", store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewTLSServer(front.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + wfe.DirectoryPath, srv.Client(), authority.GetRootCert(0).Cert
}

// serve --acme against a real ACME server (Pebble, in the test): the first
// TLS handshake for the domain gets a certificate that Pebble issued, the
// relay answers over it, and the certificate is cached in the data folder
// for the next start.
func TestACMEWithPebble(t *testing.T) {
	directory, client, root := startPebble(t)
	// The start-up checks and autocert talk to the ACME server through the
	// default client: it must trust Pebble's test certificate.
	saved := http.DefaultClient
	http.DefaultClient = client
	t.Cleanup(func() { http.DefaultClient = saved })

	// The domain resolves here to this machine.
	const domain = "relay.localhost"
	lookup := lookupHost
	lookupHost = func(context.Context, string) ([]string, error) { return []string{"127.0.0.1"}, nil }
	t.Cleanup(func() { lookupHost = lookup })

	data := t.TempDir()
	tr, err := serveOptions{acme: domain, acmeDirectory: directory}.prepare(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tr.tlsConfig())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "relay") })}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	pool := x509.NewCertPool()
	pool.AddCert(root)
	phone := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: domain},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
		}}}
	resp, err := phone.Get("https://" + domain + "/")
	if err != nil {
		t.Fatalf("HTTPS with the issued certificate: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "relay" || resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		t.Fatalf("answer %q", body)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if err := leaf.VerifyHostname(domain); err != nil {
		t.Fatalf("certificate: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "acme")); len(ents) == 0 {
		t.Fatal("nothing cached in the data folder")
	}
	t.Logf("issued by %s for %v, valid until %s", leaf.Issuer.CommonName, leaf.DNSNames, leaf.NotAfter.Format(time.DateOnly))
}
