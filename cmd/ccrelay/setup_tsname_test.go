package main

import (
	"strings"
	"testing"
)

// The tailnet name tailscale status reports becomes the phones' URL, the
// relay's --public-url in the service file and the link in the QR code: a
// name that is not a host name (a path, a user, a port, a line break) is
// refused, never written anywhere.
func TestTailscaleReachName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"laptop.tail1234.ts.net", true},
		{"laptop.tail1234.ts.net.", true},
		{"evil.example/x", false},
		{"me@laptop.tail1234.ts.net", false},
		{"laptop.tail1234.ts.net:444", false},
		{"laptop.tail1234.ts.net\nExecStartPre=/bin/true", false},
		{"laptop.tail1234.ts.net#x", false},
		{"", false},
	} {
		st := tsStatus{BackendState: "Running", CertDomains: []string{tc.name}}
		r, err := tailscaleReachWith(st, DefaultPort)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "--lan") {
				t.Errorf("%q: the refusal does not say what to do: %v", tc.name, err)
			}
			continue
		}
		if want := "https://" + strings.TrimSuffix(tc.name, "."); r.phone != want {
			t.Errorf("%q: phones open %s, want %s", tc.name, r.phone, want)
		}
	}
}
