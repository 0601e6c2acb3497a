package push

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestPublicAddress(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"127.0.0.1", false}, {"10.1.2.3", false}, {"172.16.0.1", false}, {"192.168.1.1", false},
		{"169.254.169.254", false}, {"0.0.0.0", false}, {"100.100.1.1", false}, {"224.0.0.1", false},
		{"255.255.255.255", false}, {"198.18.0.1", false}, {"::1", false}, {"::", false}, {"fd00::1", false},
		{"fe80::1", false}, {"::ffff:10.0.0.1", false}, {"::ffff:127.0.0.1", false}, {"64:ff9b::a00:1", false},
		{"ff02::1", false},
		{"8.8.8.8", true}, {"142.250.1.1", true}, {"2606:4700::1111", true}, {"::ffff:8.8.8.8", true},
	} {
		if got := PublicAddress(netip.MustParseAddr(tc.addr)); got != tc.public {
			t.Errorf("%s: public %v, want %v", tc.addr, got, tc.public)
		}
	}
}

// The Web Push client refuses to connect to a non-public address, by IP or
// by a name that resolves to one, and nothing reaches the server there.
func TestWebPushClientRefusesPrivateAddresses(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer srv.Close()
	c := publicClient()
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		resp, err := c.Post(u, "application/octet-stream", nil)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: connected", u)
		}
		if !errors.Is(err, ErrPrivateAddress) {
			t.Fatalf("%s: %v, want %v", u, err, ErrPrivateAddress)
		}
	}
	if hit {
		t.Fatal("the private server was reached")
	}
}
