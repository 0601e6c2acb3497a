package protocol

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// CleanName makes a machine's or device's name safe to show and to match:
// control characters (C0, C1), line and paragraph separators and invalid
// UTF-8 become spaces; invisible format characters are dropped, among them
// every bidirectional control (U+061C, U+200E, U+200F, U+202A–U+202E,
// U+2066–U+2069), with which a name could read as another ("ann‮enohp"
// shows as "annphone" reversed); spaces are folded and trimmed, and the name
// is cut to at most max runes (no limit when max <= 0). The zero-width
// joiner and non-joiner (U+200D, U+200C) stay: emoji sequences and several
// scripts need them. "" when nothing is left.
func CleanName(name string, max int) string {
	var b strings.Builder
	b.Grow(len(name))
	for i, w := 0, 0; i < len(name); i += w {
		r, size := utf8.DecodeRuneInString(name[i:])
		w = size
		switch {
		case r == utf8.RuneError && size <= 1, unicode.IsControl(r), unicode.In(r, unicode.Zl, unicode.Zp):
			b.WriteByte(' ')
		case r == '\u200c' || r == '\u200d':
			b.WriteRune(r)
		case unicode.Is(unicode.Cf, r):
			// dropped
		default:
			b.WriteRune(r)
		}
	}
	name = strings.Join(strings.Fields(b.String()), " ")
	if r := []rune(name); max > 0 && len(r) > max {
		name = strings.TrimSpace(string(r[:max]))
	}
	return name
}
