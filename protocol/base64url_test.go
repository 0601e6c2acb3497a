package protocol

import "testing"

// The table of base64url characters says yes to exactly the 64 of the
// alphabet (RFC 4648 §5), for every byte value.
func TestIsBase64URLByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
		if got := IsBase64URLByte(byte(c)); got != want {
			t.Errorf("IsBase64URLByte(%#x) = %v, want %v", c, got, want)
		}
	}
	for _, tc := range []struct {
		s  string
		ok bool
	}{{"", true}, {"AZaz09-_", true}, {"AZaz09-_=", false}, {"a+b", false}, {"a/b", false}, {"é", false}, {"a\x00", false}} {
		if got := isBase64URL(tc.s); got != tc.ok {
			t.Errorf("isBase64URL(%q) = %v", tc.s, got)
		}
	}
}
