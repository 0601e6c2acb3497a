package push

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// A push subscription's endpoint comes from an app: a relay that posted to
// any address it names would let a device reach the relay's own network
// (its loopback, the LAN, a cloud metadata service). The Web Push client
// made by NewWebPush connects only to public addresses, checked on the
// address actually dialled (after DNS, so a name that resolves to a private
// address is refused too), and uses no proxy (a proxy would dial for it,
// unchecked).

// ErrPrivateAddress is why a connection to a non-public address is refused.
var ErrPrivateAddress = fmt.Errorf("push endpoints must be on public addresses")

// nonPublic are the IPv4 and IPv6 ranges, besides loopback, private,
// link-local, multicast and unspecified ones, that are not the public
// Internet.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (carrier NAT, Tailscale)
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64: an IPv4 address of any kind
	netip.MustParsePrefix("2001:db8::/32"),
}

// PublicAddress reports whether a is on the public Internet.
func PublicAddress(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// publicOnly is a net.Dialer Control that refuses non-public addresses.
func publicOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("push endpoint address %q: %w", address, err)
	}
	if !PublicAddress(ap.Addr()) {
		return fmt.Errorf("%s: %w", ap.Addr(), ErrPrivateAddress)
	}
	return nil
}

// publicClient is the Web Push client: public addresses only, no proxy,
// SendTimeout, no redirect.
func publicClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: publicOnly}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        16,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{Timeout: SendTimeout, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
