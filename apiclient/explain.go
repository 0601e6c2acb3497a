package apiclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// CheckURL checks a relay URL as given by the user (--relay, ccrelay login,
// the remembered relay) and returns it without a trailing slash. A URL
// without its scheme, the most common slip, says how to write it.
func CheckURL(raw string) (string, error) {
	s := strings.TrimSuffix(strings.TrimSpace(raw), "/")
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("relay URL %q: give it with its scheme, e.g. https://%s (or http://%s for a relay on this machine)", raw, strings.TrimPrefix(s, "//"), strings.TrimPrefix(s, "//"))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("relay URL %q: the scheme must be https:// (or http:// for a relay on this machine), not %s://", raw, u.Scheme)
	}
	return s, nil
}

// CertificateError reports whether err is the relay's certificate not
// being accepted by this machine: retrying cannot help, the user must act.
func CertificateError(err error) bool {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) || errors.As(err, &ve)
}

// Explain says in plain words why the relay at relayURL could not be
// reached (err from an HTTP request or a websocket dial), and what to do
// next. Every command that talks to a relay uses it, so one failure reads
// the same everywhere.
func Explain(relayURL string, err error) string {
	relayURL = baseURL(relayURL)
	host := relayURL
	if u, perr := url.Parse(relayURL); perr == nil && u.Host != "" {
		host = u.Host
	}
	var (
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		ve  *tls.CertificateVerificationError
		rh  tls.RecordHeaderError
		dns *net.DNSError
		ne  net.Error
		ue  *url.Error
		ge  *GatewayError
	)
	switch {
	case errors.As(err, &ge):
		return "the proxy in front of it answered " + ge.Error() + ": the relay behind it does not answer; is ccrelay serve running there, and does the proxy point at its address?"
	case errors.As(err, &ue) && ue.Op == "parse", strings.Contains(err.Error(), "unsupported protocol scheme"):
		return "the relay URL " + relayURL + " has no https:// (or http://): give it with its scheme, e.g. https://" + strings.TrimPrefix(relayURL, "//")
	case errors.As(err, &ua):
		return "the relay's certificate is not trusted by this machine (signed by an unknown authority): give the authority's certificate with --ca FILE to ccrelay pair or ccrelay login, which remember it with the relay (mkcert's is `mkcert -CAROOT`/rootCA.pem), or set SSL_CERT_FILE to it"
	case errors.As(err, &he):
		return hostnameAdvice(he, relayURL)
	case errors.As(err, &ci):
		if ci.Reason == x509.Expired {
			return "the relay's certificate has expired (or is not valid yet: check this machine's clock): renew it on the relay's machine (serve reloads it on SIGHUP)"
		}
		return "the relay's certificate cannot be used (" + strings.TrimPrefix(ci.Error(), "x509: ") + "): make a server certificate for it (docs/deploy.md)"
	case errors.As(err, &ve):
		return "the relay's certificate was not accepted (" + ve.Err.Error() + "): give the authority that signed it with --ca FILE to ccrelay pair or ccrelay login, which remember it with the relay, or set SSL_CERT_FILE to it"
	case errors.As(err, &rh), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the relay at " + host + " answers plain http, not https: use http://" + host + ", or serve it over HTTPS (docs/deploy.md)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens at " + host + "; is the relay running (ccrelay serve) and is the port right?"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection to " + host + " was cut; is that the relay's address (a proxy or another server may be there)?"
	case errors.As(err, &dns):
		return "host not found (" + dns.Name + "): check the relay's URL and this machine's network"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer from " + host + " in time: is the address right, and can this machine reach it (network, firewall)?"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to " + host + ": this machine cannot reach that network (VPN, Wi-Fi, firewall?)"
	}
	return err.Error()
}

// hostnameAdvice explains a certificate made for other names than the one
// in the URL; a certificate for a name used with an IP address is the
// common case (mkcert laptop.lan, then https://127.0.0.1:8707).
func hostnameAdvice(he x509.HostnameError, relayURL string) string {
	var names []string
	if c := he.Certificate; c != nil {
		names = append(names, c.DNSNames...)
		for _, ip := range c.IPAddresses {
			names = append(names, ip.String())
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("the relay's certificate does not name %s: make one that does (e.g. mkcert NAME %s)", he.Host, he.Host)
	}
	other := ""
	if u, err := url.Parse(relayURL); err == nil && u.Host != "" {
		c := *u
		c.Host = names[0]
		if p := u.Port(); p != "" {
			c.Host = net.JoinHostPort(names[0], p)
		}
		other = " --relay " + c.String()
	}
	return fmt.Sprintf("the relay's certificate is for %s, not for %s: use%s, or make a certificate that also covers %s (e.g. mkcert %s %s)",
		strings.Join(names, ", "), he.Host, other, he.Host, names[0], he.Host)
}

// GatewayError is the answer of a proxy in front of the relay saying
// that the relay behind it does not answer (502 Bad Gateway, 504 Gateway
// Timeout): the relay is down, not refusing.
type GatewayError struct{ Status int }

func (e *GatewayError) Error() string {
	return strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
}

// Gateway returns a *GatewayError for a proxy's status saying that the
// relay behind it does not answer, nil for any other status.
func Gateway(status int) error {
	if status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
		return &GatewayError{Status: status}
	}
	return nil
}

// ReachError is a failure to reach the relay at URL; its message is
// Explain's.
type ReachError struct {
	URL string
	Err error
}

func (e *ReachError) Error() string {
	return "cannot reach the relay at " + baseURL(e.URL) + ": " + Explain(e.URL, e.Err)
}

func (e *ReachError) Unwrap() error { return e.Err }

// baseURL is raw's scheme and host, without path or query; raw itself when
// it does not parse as such.
func baseURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return raw
	}
	return u.Scheme + "://" + u.Host
}
