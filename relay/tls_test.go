package relay

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// The transport rules, request by request: plain http only from this
// machine (a page for the app elsewhere), a trusted proxy's https, the
// Host and Origin allowlists (DNS rebinding).
func TestTransportRules(t *testing.T) {
	st := openTestStore(t, t.TempDir()+"/relay.db")
	plain := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	public, _ := url.Parse("https://relay.example.com")
	proxied := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	proxied.Transport = Transport{PublicURL: public, Proxies: []netipPrefix{mustPrefix(t, "10.0.0.5")}}
	lanIP, _ := url.Parse("https://192.168.1.9:8707")
	lan := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	lan.Transport = Transport{PublicURL: lanIP}
	for _, tc := range []struct {
		name   string
		srv    *Server
		remote string
		host   string
		tls    bool
		header map[string]string
		path   string
		want   int
		body   string
	}{
		{"loopback, plain http", plain, "127.0.0.1:5000", "127.0.0.1:8707", false, nil, "/", 200, "<script"},
		{"LAN phone, plain http: the page", plain, "192.168.1.20:5000", "192.168.1.9:8707", false, nil, "/", 403, "needs HTTPS"},
		{"LAN phone, plain http: the API", plain, "192.168.1.20:5000", "192.168.1.9:8707", false, nil, "/status", 403, "HTTPS needed"},
		{"LAN phone, own certificate", plain, "192.168.1.20:5000", "192.168.1.9:8707", true, nil, "/", 200, "<script"},
		{"a proxy not trusted", plain, "127.0.0.1:5000", "127.0.0.1:8707", false, map[string]string{"X-Forwarded-For": "203.0.113.1", "X-Forwarded-Proto": "https"}, "/", 403, "does not trust"},
		{"DNS rebinding", plain, "127.0.0.1:5000", "evil.example:8707", false, nil, "/", 421, "--public-url"},
		{"another site's page", plain, "127.0.0.1:5000", "127.0.0.1:8707", false, map[string]string{"Origin": "https://evil.example"}, "/status", 403, "other sites"},
		{"same origin", plain, "127.0.0.1:5000", "127.0.0.1:8707", false, map[string]string{"Origin": "http://127.0.0.1:8707"}, "/health", 401, ""},
		{"trusted proxy, https", proxied, "10.0.0.5:5000", "relay.internal:8707", false, map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "relay.example.com", "X-Forwarded-For": "198.51.100.7"}, "/", 200, "<script"},
		{"trusted proxy, http", proxied, "10.0.0.5:5000", "relay.example.com", false, map[string]string{"X-Forwarded-Proto": "http", "X-Forwarded-For": "198.51.100.7"}, "/", 403, "needs HTTPS"},
		{"forged proxy headers", proxied, "198.51.100.7:5000", "relay.example.com", false, map[string]string{"X-Forwarded-Proto": "https"}, "/", 403, "needs HTTPS"},
		{"public URL: another name", proxied, "10.0.0.5:5000", "relay.internal", false, map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "other.example.com"}, "/", 421, ""},
		{"public URL: an IP address", proxied, "192.168.1.20:5000", "192.168.1.9", true, nil, "/", 421, ""},
		{"public URL of an IP address: that address", lan, "192.168.1.20:5000", "192.168.1.9:8707", true, nil, "/", 200, "<script"},
		{"public URL of an IP address: another address", lan, "192.168.1.20:5000", "192.168.1.10:8707", true, nil, "/", 421, ""},
		{"public URL of an IP address: loopback", lan, "127.0.0.1:5000", "127.0.0.1:8707", true, nil, "/", 200, "<script"},
		{"public URL: loopback still answers", proxied, "127.0.0.1:5000", "127.0.0.1:8707", false, nil, "/", 200, "<script"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "http://"+tc.host+tc.path, nil)
			req.RemoteAddr = tc.remote
			req.Host = tc.host
			if tc.tls {
				req.TLS = &tls.ConnectionState{}
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			tc.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("%d %.200q, want %d with %q", rec.Code, rec.Body.String(), tc.want, tc.body)
			}
		})
	}
}

// Every answer over HTTPS (the relay's own TLS, or a trusted proxy's) says
// Strict-Transport-Security; none over plain http, nor to forged proxy
// headers.
func TestHSTSOnHTTPSOnly(t *testing.T) {
	st := openTestStore(t, t.TempDir()+"/relay.db")
	plain := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	public, _ := url.Parse("https://relay.example.com")
	proxied := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	proxied.Transport = Transport{PublicURL: public, Proxies: []netipPrefix{mustPrefix(t, "10.0.0.5")}}
	https := map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}
	for _, tc := range []struct {
		name   string
		srv    *Server
		remote string
		host   string
		tls    bool
		header map[string]string
		path   string
		hsts   bool
	}{
		{"own certificate: the page", plain, "192.168.1.20:5000", "192.168.1.9:8707", true, nil, "/", true},
		{"own certificate: the API, refused", plain, "192.168.1.20:5000", "192.168.1.9:8707", true, nil, "/status", true},
		{"own certificate: health", plain, "192.168.1.20:5000", "192.168.1.9:8707", true, nil, "/healthz", true},
		{"trusted proxy, https", proxied, "10.0.0.5:5000", "relay.example.com", false, https, "/", true},
		{"trusted proxy, https, a name refused", proxied, "10.0.0.5:5000", "other.example.com", false, https, "/", true},
		{"loopback, plain http", plain, "127.0.0.1:5000", "127.0.0.1:8707", false, nil, "/", false},
		{"LAN, plain http", plain, "192.168.1.20:5000", "192.168.1.9:8707", false, nil, "/", false},
		{"trusted proxy, http", proxied, "10.0.0.5:5000", "relay.example.com", false, map[string]string{"X-Forwarded-Proto": "http"}, "/", false},
		{"forged proxy headers", proxied, "198.51.100.7:5000", "relay.example.com", false, https, "/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "http://"+tc.host+tc.path, nil)
			req.RemoteAddr = tc.remote
			req.Host = tc.host
			if tc.tls {
				req.TLS = &tls.ConnectionState{}
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			tc.srv.Handler().ServeHTTP(rec, req)
			got := rec.Header().Get("Strict-Transport-Security")
			if want := map[bool]string{true: "max-age=31536000"}[tc.hsts]; got != want {
				t.Errorf("status %d, Strict-Transport-Security %q, want %q", rec.Code, got, want)
			}
		})
	}
}

// Behind a trusted proxy, the client's address (X-Forwarded-For) is the
// one logged and limited, and pairing links use the public URL.
func TestProxyClientAddress(t *testing.T) {
	r := startTestRelay(t)
	public, _ := url.Parse("https://relay.example.com")
	r.relay.Transport = Transport{PublicURL: public, Proxies: []netipPrefix{mustPrefix(t, "127.0.0.1")}}
	req, _ := http.NewRequest("GET", r.srv.URL+"/status", nil)
	req.Host = "relay.example.com"
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	req.Header.Set("Authorization", "Bearer "+credentialPrefix+"wrong")
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(r.log.String(), "addr=198.51.100.7") {
		t.Errorf("%d; log: %s", resp.StatusCode, r.log.String())
	}
}

// The relay's names and flags, parsed.
func TestParseTransportFlags(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{{"127.0.0.1", true}, {"100.64.0.0/10, ::1", true}, {"proxy", false}, {"", false}} {
		if _, err := ParseProxies(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseProxies(%q): %v", tc.in, err)
		}
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"https://relay.example.com", true}, {"https://relay.example.com/", true}, {"relay.example.com", false}, {"https://relay.example.com/app", false}, {"ftp://x", false}} {
		if _, err := ParsePublicURL(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParsePublicURL(%q): %v", tc.in, err)
		}
	}
}

type netipPrefix = netip.Prefix

func mustPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := ParseProxies(s)
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}

// The relay token works from the relay's own machine also when it uses the
// relay's public address (the connection comes from the address it
// reached), and from nowhere else.
func TestBootstrapFromOwnAddress(t *testing.T) {
	st := openTestStore(t, t.TempDir()+"/relay.db")
	s := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	for _, tc := range []struct {
		local string
		want  int
	}{{"192.0.2.10", 200}, {"192.0.2.11", 401}} {
		req := httptest.NewRequest("GET", "https://192.0.2.10/status", nil)
		req.RemoteAddr = "192.0.2.10:5555"
		req.TLS = &tls.ConnectionState{}
		req.Header.Set("Authorization", "Bearer "+testToken)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP(tc.local), Port: 443}))
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("local %s: %d %s", tc.local, rec.Code, rec.Body)
		}
	}
}
