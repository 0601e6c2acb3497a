package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// --acme, through autocert's seams: the manager asks only for the domain,
// caches in the data folder, talks to the ACME server given, and the TLS
// configuration answers the TLS-ALPN challenge; the public URL follows the
// domain.
func TestACMEManager(t *testing.T) {
	dir := srvDirectory(t)
	data := t.TempDir()
	tr, err := serveOptions{acme: "localhost", acmeDirectory: dir}.prepare(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	m := tr.acme
	if m == nil || !tr.tls() {
		t.Fatal("no ACME manager")
	}
	if err := m.HostPolicy(context.Background(), "localhost"); err != nil {
		t.Errorf("the domain refused: %v", err)
	}
	if err := m.HostPolicy(context.Background(), "evil.example"); err == nil {
		t.Error("another name would get a certificate")
	}
	if c, ok := m.Cache.(autocert.DirCache); !ok || string(c) != filepath.Join(data, "acme") {
		t.Errorf("cache %#v", m.Cache)
	}
	if m.Client.DirectoryURL != dir {
		t.Errorf("directory %q", m.Client.DirectoryURL)
	}
	cfg := tr.tlsConfig()
	if !slices.Contains(cfg.NextProtos, acme.ALPNProto) || cfg.MinVersion < tls.VersionTLS12 {
		t.Errorf("TLS config: %v", cfg.NextProtos)
	}
	if u := tr.transport.PublicURL; u == nil || u.String() != "https://localhost" {
		t.Errorf("public URL %v", u)
	}
}

// srvDirectory is an ACME directory that answers (the checks at start need
// nothing more).
func srvDirectory(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"newNonce":"x","newAccount":"x","newOrder":"x"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/directory"
}
