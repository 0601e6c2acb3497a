package protocol

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// DeriveID is SHA-256 over the parts, each ended by a NUL byte, whatever
// their length (short parts are hashed from a buffer of their own).
func TestDeriveIDLongParts(t *testing.T) {
	for _, parts := range [][]string{{}, {"a"}, {"s", "uuid-1", "0", "text"}, {strings.Repeat("x", 255)},
		{strings.Repeat("x", 256)}, {strings.Repeat("x", 300), "y"}, {"line", strings.Repeat("{}", 5000)}} {
		h := sha256.New()
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
		if got, want := DeriveID(parts...), derived(h.Sum(nil)); got != want {
			t.Fatalf("DeriveID of %d parts = %s, want %s", len(parts), got, want)
		}
	}
}
