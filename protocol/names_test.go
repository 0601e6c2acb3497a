package protocol

import (
	"strings"
	"testing"
)

// Names keep no bidirectional control, control character or other
// invisible format character: a name cannot read as another.
func TestCleanName(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "Ann's phone", "Ann's phone"},
		{"spaces folded", "  Ann's\tphone \n", "Ann's phone"},
		{"right-to-left override", "ann\u202eenohp", "annenohp"},
		{"left-to-right override", "a\u202db", "ab"},
		{"embeddings and pop", "\u202aa\u202bb\u202cc", "abc"},
		{"isolates", "\u2066a\u2067b\u2068c\u2069", "abc"},
		{"marks", "a\u200eb\u200fc\u061cd", "abcd"},
		{"zero-width space and BOM", "a\u200bb\ufeffc", "abc"},
		{"C0 and C1 controls", "a\x00b\x1bc\u0085d\u009be", "a b c d e"},
		{"line and paragraph separators", "a\u2028b\u2029c", "a b c"},
		{"invalid UTF-8", "a\xffb", "a b"},
		{"emoji sequence kept", "👩\u200d💻 laptop", "👩\u200d💻 laptop"},
		{"non-joiner kept", "می\u200cخواهم", "می\u200cخواهم"},
		{"Arabic kept", "هاتف آن", "هاتف آن"},
		{"only controls", "\u202e\u2066\x00", ""},
		{"cut to max runes", strings.Repeat("é", 70), strings.Repeat("é", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CleanName(tc.in, 64); got != tc.want {
				t.Errorf("CleanName(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
