package relay

// Transport: HTTPS, proxies, and which names the relay answers to.
//
// Beyond 127.0.0.1 the relay speaks only HTTPS: its own certificate
// (CertReloader, ACME) or a TLS proxy in front of it (Transport.Proxies,
// whose X-Forwarded-Proto/-For/-Host are trusted, from their addresses
// only). A request over plain http from another machine gets a page that
// says why the relay stops there and what to do. A Host or Origin other
// than the relay's own names is refused (DNS rebinding).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
)

// Transport says how the relay is reached. The zero value: directly, on
// 127.0.0.1 or with its own certificate, under any IP address or
// "localhost".
type Transport struct {
	// PublicURL is the relay's address as others reach it
	// (https://relay.example.com): its host is the one name the relay
	// answers to besides loopback, and printed links use it.
	PublicURL *url.URL
	// Proxies are the addresses of TLS proxies in front of the relay; only
	// their X-Forwarded-* headers are believed.
	Proxies []netip.Prefix
	// Hosts are further names the relay answers to (the ACME domain).
	Hosts []string
}

// ParseProxies reads --behind-proxy: addresses or prefixes, comma-separated.
func ParseProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("--behind-proxy %q: not an IP address or prefix (e.g. 127.0.0.1)", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	if len(out) == 0 {
		return nil, errors.New("--behind-proxy: give the proxy's address, e.g. 127.0.0.1")
	}
	return out, nil
}

// ParsePublicURL reads --public-url: an https URL with a host and no path.
func ParsePublicURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--public-url: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("--public-url %q: give the address the phone opens, e.g. https://relay.example.com", s)
	}
	u.Path = ""
	return u, nil
}

func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// fromProxy says whether r came from one of the trusted proxies.
func (s *Server) fromProxy(r *http.Request) bool {
	a := peerAddr(r)
	for _, p := range s.Transport.Proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var proxyHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded", "X-Real-Ip"}

// proxied says whether r carries any header a proxy adds.
func proxied(r *http.Request) bool {
	for _, h := range proxyHeaders {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// directLoopback: r came from this machine, over no proxy: from a
// loopback address, or from the very address it reached (a program on the
// relay's machine using its public name; no one else can complete a TCP
// handshake from that address). A proxy on this machine connects from
// 127.0.0.1 too, but adds X-Forwarded-For: Caddy and tailscale serve do.
func (s *Server) directLoopback(r *http.Request) bool {
	if proxied(r) {
		return false
	}
	peer := peerAddr(r)
	if peer.IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ta, ok := la.(*net.TCPAddr); ok {
			if a, ok := netip.AddrFromSlice(ta.IP); ok && a.Unmap() == peer && peer.IsValid() {
				return true
			}
		}
	}
	return false
}

// clientAddr is the address a request came from: the peer's, or behind a
// trusted proxy the last one the proxy added to X-Forwarded-For.
func (s *Server) clientAddr(r *http.Request) string {
	if s.fromProxy(r) {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			parts := strings.Split(xff[len(xff)-1], ",")
			if a, err := netip.ParseAddr(strings.TrimSpace(parts[len(parts)-1])); err == nil {
				return a.String()
			}
		}
	}
	return r.RemoteAddr
}

// secure: r reached the relay over TLS, its own or a trusted proxy's.
func (s *Server) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return s.fromProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// requestHost is the name the client asked for: Host, or behind a
// trusted proxy X-Forwarded-Host when it set one.
func (s *Server) requestHost(r *http.Request) string {
	if s.fromProxy(r) {
		if h := r.Header.Get("X-Forwarded-Host"); h != "" {
			return h
		}
	}
	return r.Host
}

// hostAllowed: the relay answers to loopback names, to the public URL's
// host (a name or an address), to Transport.Hosts, and (without a public
// URL) to any IP address.
// Any other name is how a DNS rebinding attack would look.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" {
		return true
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		u := s.Transport.PublicURL
		if u == nil || a.IsLoopback() {
			return true
		}
		// A public URL may be an address (a LAN's, with a certificate
		// for it): that address, and no other.
		p, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]"))
		return err == nil && p.Unmap() == a.Unmap()
	}
	if u := s.Transport.PublicURL; u != nil && strings.EqualFold(u.Hostname(), host) {
		return true
	}
	for _, h := range s.Transport.Hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// originAllowed: a request a browser made from another site is refused
// (websockets and the API alike). No Origin: not a browser, or a
// same-origin GET.
func (s *Server) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, s.requestHost(r)) && s.hostAllowed(u.Host)
}

// HSTS is the Strict-Transport-Security header of every answer over HTTPS
// (the relay's own TLS or a trusted proxy's): once a browser has reached
// the relay's name over HTTPS, for a year it goes there only over HTTPS,
// so that no one on the way can turn a link into plain http. Not on plain
// http, where browsers ignore it, nor with includeSubDomains: the relay
// does not speak for other names of its domain.
const HSTS = "max-age=31536000"

// transport applies the Host and Origin allowlists and refuses plain http
// from other machines (a page for the app, 403 for the rest). Every answer
// over HTTPS says HSTS.
func (s *Server) transport(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.secure(r) {
			w.Header().Set("Strict-Transport-Security", HSTS)
		}
		if !s.hostAllowed(s.requestHost(r)) {
			s.log.Warn("unknown host refused", "addr", s.clientAddr(r), "host", s.requestHost(r))
			http.Error(w, "this relay does not answer to that name (set --public-url to the address you open)", http.StatusMisdirectedRequest)
			return
		}
		if !s.originAllowed(r) {
			s.log.Warn("foreign origin refused", "addr", s.clientAddr(r), "origin", r.Header.Get("Origin"))
			http.Error(w, "requests from other sites are refused", http.StatusForbidden)
			return
		}
		if !s.secure(r) && !s.directLoopback(r) {
			s.plainHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// plainHTTP answers a request over plain http from another machine.
func (s *Server) plainHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	why := "This relay speaks plain http, and you reached it from another machine. Over plain http anyone on the network could read your sessions and take the credential that runs code on your computer, and the browser refuses the cryptography the app needs. So the app stops here."
	what := []string{
		"On the same network or anywhere with Tailscale: run <code>tailscale serve --bg 8707</code> on the relay's machine, start the relay with <code>--behind-proxy 127.0.0.1 --public-url https://NAME.TAILNET.ts.net</code>, and open that https address.",
		"With a certificate: <code>ccrelay serve --tls-cert FILE --tls-key FILE</code>, or <code>--acme DOMAIN</code> on a public server.",
		"Behind Caddy or another TLS proxy: <code>--behind-proxy PROXY-ADDRESS --public-url https://YOUR-NAME</code>.",
	}
	if s.proxiedUntrusted(r) {
		what = append([]string{"This request came through a proxy the relay does not trust: start the relay with <code>--behind-proxy</code> and the proxy's address."}, what...)
	}
	if !strings.HasPrefix(r.URL.Path, "/") || r.URL.Path == "/" || r.URL.Path == "/index.html" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.WriteHeader(http.StatusForbidden)
		var b strings.Builder
		b.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>ccrelay: HTTPS needed</title>` +
			`<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:2em auto;padding:0 1em}code{font-size:.9em}</style></head><body id="https-needed"><h1>ccrelay needs HTTPS here</h1><p>`)
		b.WriteString(html.EscapeString(why))
		b.WriteString(`</p><p>What to do:</p><ul>`)
		for _, x := range what {
			b.WriteString("<li>" + x + "</li>")
		}
		b.WriteString(`</ul><p>See docs/deploy.md for each way, step by step.</p></body></html>`)
		fmt.Fprint(w, b.String())
		return
	}
	http.Error(w, "HTTPS needed: this relay speaks plain http only to 127.0.0.1 (see docs/deploy.md)", http.StatusForbidden)
}

func (s *Server) proxiedUntrusted(r *http.Request) bool { return proxied(r) && !s.fromProxy(r) }

// CertReloader serves a certificate from files, read again by Reload
// (serve calls it on SIGHUP), so that a renewed certificate needs no
// restart. A reload that fails keeps the certificate in use.
type CertReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// LoadCert reads the certificate and its key, or says in one line what is
// wrong with them.
func LoadCert(certFile, keyFile string) (*CertReloader, error) {
	c := &CertReloader{certFile: certFile, keyFile: keyFile}
	return c, c.Reload()
}

// Reload reads the files again.
func (c *CertReloader) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("certificate %s with key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert.Store(&cert)
	return nil
}

// GetCertificate is for tls.Config.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cert.Load(), nil
}
