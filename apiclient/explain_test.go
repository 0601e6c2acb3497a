package apiclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// tlsServer serves HTTPS with a certificate for names (host names and IP
// addresses), signed by its own authority; it returns the server and that authority.
func tlsServer(t *testing.T, names ...string) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return srv, pool
}

// Each way of failing to reach a relay reads as what failed, in plain
// words, and the next step; the errors are the real ones of net/http.
func TestExplain(t *testing.T) {
	lan, pool := tlsServer(t, "laptop.lan")
	own, _ := tlsServer(t, "laptop.lan", "127.0.0.1")
	_, port, _ := net.SplitHostPort(lan.Listener.Addr().String())
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	// A server that takes the connection and closes it without answering.
	cut, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	go func() {
		for {
			c, err := cut.Accept()
			if err != nil {
				return
			}
			go func() { // the request read, so that it closes cleanly (EOF, not a reset)
				c.Read(make([]byte, 4096))
				c.Close()
			}()
		}
	}()
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	for _, tc := range []struct {
		name, url string
		client    *http.Client
		want      []string
	}{
		{"unknown authority", own.URL, http.DefaultClient,
			[]string{"not trusted by this machine", "--ca FILE", "SSL_CERT_FILE"}},
		{"no IP SANs: a name's certificate used with 127.0.0.1", "https://127.0.0.1:" + port, trusting,
			[]string{"certificate is for laptop.lan, not for 127.0.0.1", "--relay https://laptop.lan:" + port, "mkcert laptop.lan 127.0.0.1"}},
		{"name mismatch", "https://localhost:" + port, trusting,
			[]string{"certificate is for laptop.lan, not for localhost", "--relay https://laptop.lan:" + port}},
		{"connection refused", "http://" + closed, http.DefaultClient,
			[]string{"connection refused", "nothing listens at " + closed, "ccrelay serve"}},
		{"https to a plain http relay", strings.Replace(plain.URL, "http://", "https://", 1), http.DefaultClient,
			[]string{"answers plain http, not https", "use " + plain.URL}},
		{"no scheme", "127.0.0.1:8707", http.DefaultClient,
			[]string{"no https://"}},
		{"closed without an answer", "http://" + cut.Addr().String(), http.DefaultClient,
			[]string{"the connection to " + cut.Addr().String() + " was cut", "is that the relay's address"}},
		{"host not found", "https://nonexistent.invalid", http.DefaultClient,
			[]string{"host not found (nonexistent.invalid)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			req, rerr := http.NewRequest("GET", tc.url+"/healthz", nil)
			if rerr != nil {
				err = rerr
			} else {
				resp, derr := tc.client.Do(req)
				if derr == nil {
					resp.Body.Close()
					t.Fatalf("GET %s answered %s", tc.url, resp.Status)
				}
				err = derr
			}
			got := Explain(tc.url, err)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Explain(%v)\n = %q\nwant it to say %q", err, got, w)
				}
			}
			if strings.Contains(got, "x509:") || strings.Contains(got, "tls:") || strings.Contains(got, "dial tcp") || strings.Contains(got, "EOF") {
				t.Errorf("Explain(%v) = %q: a raw Go error", err, got)
			}
		})
	}
}

// A relay URL is written with its scheme; without it, the message says how.
func TestCheckURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "https://relay.example.com/", want: "https://relay.example.com"},
		{in: "http://127.0.0.1:8707", want: "http://127.0.0.1:8707"},
		{in: "127.0.0.1:8707", err: "give it with its scheme, e.g. https://127.0.0.1:8707"},
		{in: "relay.example.com", err: "e.g. https://relay.example.com"},
		{in: "ftp://relay.example.com", err: "not ftp://"},
		{in: "", err: "give it with its scheme"},
	} {
		got, err := CheckURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CheckURL(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CheckURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// A relay whose certificate this machine does not trust is not an outage:
// the user hears at once what is wrong and what to pass, not only that the
// relay cannot be reached.
func TestClientSaysCertificateNotTrusted(t *testing.T) {
	srv, _ := tlsServer(t, "laptop.lan", "127.0.0.1")
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	var notices, logs logRecords
	cl := NewClient(Config{URL: srv.URL, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger: logs.logger(), Notice: &notices}, box)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitLog(t, &logs, "reconnecting", 2)
	got := notices.String()
	for _, w := range []string{"cannot reach the relay at " + srv.URL, "not trusted by this machine", "--ca FILE", "SSL_CERT_FILE"} {
		if !strings.Contains(got, w) {
			t.Errorf("the user heard %q; want it to say %q", got, w)
		}
	}
	if strings.Contains(got, "x509:") || strings.Contains(got, "retrying in the background until it answers") {
		t.Errorf("the user heard %q: a raw error, or as if the relay were down", got)
	}
}
