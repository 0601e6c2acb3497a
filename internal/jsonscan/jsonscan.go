// Package jsonscan reads JSON without encoding/json's reflection: a
// validator, a string decoder and walks over an object's members or an
// array's elements that hand back raw values. Each function gives exactly
// what encoding/json gives for the same bytes (json.Valid, json.Unmarshal
// into a string), several times faster, so that hot paths can decode only
// the values they use.
package jsonscan

import (
	"bytes"
	"errors"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit: deeper values are invalid.
const maxDepth = 10000

// Valid reports whether b is one valid JSON value with only white space
// around it, as json.Valid does.
func Valid(b []byte) bool {
	var stack []byte // '{' or '[' of each open container
	i := ws(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) >= maxDepth {
				return false
			}
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			i = ws(b, i+1)
			if i < len(b) && b[i] == closer {
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i = key(b, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			if i = skipString(b, i); i < 0 {
				return false
			}
		case 't':
			if i = literal(b, i, "true"); i < 0 {
				return false
			}
		case 'f':
			if i = literal(b, i, "false"); i < 0 {
				return false
			}
		case 'n':
			if i = literal(b, i, "null"); i < 0 {
				return false
			}
		default:
			if i = number(b, i); i < 0 {
				return false
			}
		}
		// After a value: close containers, or go on to the next member.
		for {
			i = ws(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i = ws(b, i+1)
				if top == '{' {
					if i = key(b, i); i < 0 {
						return false
					}
				}
				break
			}
			if (top == '{' && b[i] == '}') || (top == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// ws skips white space from i.
func ws(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// key consumes `"name" :` and the white space after it; -1 if invalid.
func key(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = skipString(b, i); i < 0 {
		return -1
	}
	i = ws(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return ws(b, i+1)
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// number consumes a JSON number at i; -1 if there is none.
func number(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// plain marks the bytes a string holds as they are: not a quote, not a
// backslash, not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString consumes the string at i (b[i] == '"') and returns the index
// after its closing quote, or -1 if it is not a valid JSON string.
func skipString(b []byte, i int) int {
	i++
	for {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if getu4(b[i:]) < 0 {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			return -1 // a control character
		}
	}
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// String decodes the JSON string v (quotes included) as json.Unmarshal
// into a string does: escapes are decoded, invalid UTF-8 and lone
// surrogates become U+FFFD. ok is false when v is not a valid JSON string.
func String(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	// Fast path: nothing to unescape or coerce.
	r := 0
	for r < len(s) {
		c := s[r]
		if c < utf8.RuneSelf {
			if !plain[c] {
				break
			}
			r++
			continue
		}
		rr, size := utf8.DecodeRune(s[r:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		r += size
	}
	if r == len(s) {
		return string(s), true
	}
	b := make([]byte, r, len(s)+2*utf8.UTFMax)
	copy(b, s[:r])
	for r < len(s) {
		switch c := s[r]; {
		case c == '\\':
			r++
			if r >= len(s) {
				return "", false
			}
			switch s[r] {
			case '"', '\\', '/':
				b = append(b, s[r])
				r++
			case 'b':
				b = append(b, '\b')
				r++
			case 'f':
				b = append(b, '\f')
				r++
			case 'n':
				b = append(b, '\n')
				r++
			case 'r':
				b = append(b, '\r')
				r++
			case 't':
				b = append(b, '\t')
				r++
			case 'u':
				r--
				rr := getu4(s[r:])
				if rr < 0 {
					return "", false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := getu4(s[r:])
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						break
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
			default:
				return "", false
			}
		case c == '"', c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			// A run of plain ASCII.
			j := r + 1
			for j < len(s) && s[j] < utf8.RuneSelf && plain[s[j]] {
				j++
			}
			b = append(b, s[r:j]...)
			r = j
		default:
			rr, size := utf8.DecodeRune(s[r:])
			if rr == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, rr)
				r++
				continue
			}
			b = append(b, s[r:r+size]...)
			r += size
		}
	}
	return string(b), true
}

// ErrSyntax is returned by the walks for input that is not well formed.
var ErrSyntax = errors.New("invalid JSON")

// EachMember calls fn with every key of the object b (unescaped) and the
// raw bytes of its value, in order. It checks the structure but not the
// tokens inside the values it hands back: callers that need exactness
// check Valid first. It stops at fn's first error and returns it.
func EachMember(b []byte, fn func(k, v []byte) error) error {
	i := ws(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrSyntax
	}
	i = ws(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return ErrSyntax
		}
		ks := i
		if i = skipString(b, i); i < 0 {
			return ErrSyntax
		}
		k := b[ks+1 : i-1]
		if bytes.IndexByte(k, '\\') >= 0 || !utf8.Valid(k) {
			s, ok := String(b[ks:i])
			if !ok {
				return ErrSyntax
			}
			k = []byte(s)
		}
		i = ws(b, i)
		if i >= len(b) || b[i] != ':' {
			return ErrSyntax
		}
		i = ws(b, i+1)
		vs := i
		if i = skipValue(b, i); i < 0 {
			return ErrSyntax
		}
		if err := fn(k, b[vs:i]); err != nil {
			return err
		}
		i = ws(b, i)
		if i >= len(b) {
			return ErrSyntax
		}
		switch b[i] {
		case '}':
			return nil
		case ',':
			i = ws(b, i+1)
		default:
			return ErrSyntax
		}
	}
}

// EachElem calls fn with the raw bytes of every element of the array b,
// with the same checks as EachMember.
func EachElem(b []byte, fn func(v []byte) error) error {
	i := ws(b, 0)
	if i >= len(b) || b[i] != '[' {
		return ErrSyntax
	}
	i = ws(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		vs := i
		if i = skipValue(b, i); i < 0 {
			return ErrSyntax
		}
		if err := fn(b[vs:i]); err != nil {
			return err
		}
		i = ws(b, i)
		if i >= len(b) {
			return ErrSyntax
		}
		switch b[i] {
		case ']':
			return nil
		case ',':
			i = ws(b, i+1)
		default:
			return ErrSyntax
		}
	}
}

// skipValue returns the end of the value at i, checking only that strings
// close and brackets balance; -1 if they do not.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				if j == i {
					return -1
				}
				return j
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
