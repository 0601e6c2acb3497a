package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/ccrelay/ccrelay/relay"
)

// serveOptions are serve's HTTPS and proxy flags.
type serveOptions struct {
	certFile, keyFile   string
	acme, acmeDirectory string
	behindProxy         string
	publicURL           string
}

// acmeCheckTimeout bounds each check of --acme at start (the domain's DNS,
// the ACME server's directory).
const acmeCheckTimeout = 10 * time.Second

// transport is how a relay is served: plain, its own certificate, ACME,
// or behind a proxy.
type transport struct {
	transport relay.Transport
	cert      *relay.CertReloader
	acme      *autocert.Manager
	// store is the PostgreSQL URL of --store ("": SQLite in the data folder).
	store string
}

func (t *transport) tls() bool { return t.cert != nil || t.acme != nil }

// prepare checks the flags, reads the certificate and reaches the ACME
// server: every mistake is one line, before anything is created.
func (o serveOptions) prepare(ctx context.Context, dir string) (*transport, error) {
	t := &transport{}
	if (o.certFile == "") != (o.keyFile == "") {
		return nil, errors.New("give --tls-cert and --tls-key together")
	}
	if o.acme != "" && o.certFile != "" {
		return nil, errors.New("give --acme or --tls-cert/--tls-key, not both")
	}
	if o.behindProxy != "" {
		p, err := relay.ParseProxies(o.behindProxy)
		if err != nil {
			return nil, err
		}
		t.transport.Proxies = p
	}
	if o.publicURL != "" {
		u, err := relay.ParsePublicURL(o.publicURL)
		if err != nil {
			return nil, err
		}
		t.transport.PublicURL = u
	}
	if o.certFile != "" {
		c, err := relay.LoadCert(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		t.cert = c
	}
	if o.acme != "" {
		m, err := acmeManager(ctx, o.acme, o.acmeDirectory, dir)
		if err != nil {
			return nil, err
		}
		t.acme = m
		t.transport.Hosts = []string{o.acme}
		if t.transport.PublicURL == nil {
			t.transport.PublicURL, _ = relay.ParsePublicURL("https://" + o.acme)
		}
	}
	return t, nil
}

// lookupHost resolves the --acme domain at start (a test seam: nothing
// resolves to this machine in the tests but localhost, which ACME refuses).
var lookupHost = net.DefaultResolver.LookupHost

// acmeManager checks that domain resolves and that the ACME server answers,
// and returns a manager that caches its account and certificates in
// dir/acme (created when the first certificate is stored).
func acmeManager(ctx context.Context, domain, directory, dir string) (*autocert.Manager, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if domain == "" || strings.ContainsAny(domain, "/:@ ") || net.ParseIP(domain) != nil {
		return nil, fmt.Errorf("--acme %q: give the relay's domain name, e.g. relay.example.com", domain)
	}
	if directory == "" {
		directory = acme.LetsEncryptURL
	}
	cctx, cancel := context.WithTimeout(ctx, acmeCheckTimeout)
	defer cancel()
	if _, err := lookupHost(cctx, domain); err != nil {
		return nil, fmt.Errorf("--acme %s: the domain does not resolve (%v); point its DNS at this machine first", domain, err)
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, directory, nil)
	if err != nil {
		return nil, fmt.Errorf("--acme-directory %q: %w", directory, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--acme %s: the ACME server %s cannot be reached: %v", domain, directory, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("--acme %s: the ACME server %s answered %s", domain, directory, resp.Status)
	}
	return &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(filepath.Join(dir, "acme")),
		HostPolicy: autocert.HostWhitelist(domain),
		Client:     &acme.Client{DirectoryURL: directory},
	}, nil
}

func (t *transport) tlsConfig() *tls.Config {
	if t.acme != nil {
		c := t.acme.TLSConfig()
		c.NextProtos = []string{"http/1.1", acme.ALPNProto}
		c.MinVersion = tls.VersionTLS12
		return c
	}
	return &tls.Config{GetCertificate: t.cert.GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

// reloadOnHUP reads the certificate files again on each SIGHUP until the
// returned stop is called. A reload that fails keeps the old certificate.
func (t *transport) reloadOnHUP(log *slog.Logger) (stop func()) {
	if t.cert == nil {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if err := t.cert.Reload(); err != nil {
					log.Warn("SIGHUP: certificate not reloaded; the old one stays", "err", err)
				} else {
					log.Info("SIGHUP: certificate reloaded")
				}
			}
		}
	})
	return func() { signal.Stop(hup); close(done); wg.Wait() }
}
