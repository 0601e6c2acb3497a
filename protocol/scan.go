package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ccrelay/ccrelay/internal/jsonscan"
)

// usageMembers is the members of a usage object as json.Unmarshal into a
// map gives them (the last of duplicate keys, values copied), read by a
// scan when data is a valid object: usage comes with every assistant
// message a mapper reads.
func usageMembers(data []byte) (map[string]json.RawMessage, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' && jsonscan.Valid(data) {
		m := make(map[string]json.RawMessage, 8)
		err := jsonscan.EachMember(data, func(k, v []byte) error {
			m[string(k)] = bytes.Clone(v)
			return nil
		})
		if err == nil {
			return m, nil
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	if m == nil {
		return nil, invalid("usage is not an object")
	}
	return m, nil
}

// jsonNumber is raw as json.Unmarshal into a float64 decodes it; ok is
// false when that fails (raw is not a number, or out of range).
func jsonNumber(raw []byte) (float64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		var f float64
		return f, json.Unmarshal(raw, &f) == nil
	}
	if !jsonscan.Valid(raw) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	return f, err == nil
}

// appendCompactHTML appends the valid JSON raw as json.Compact then
// json.HTMLEscape write it: without white space outside strings, with <, >,
// & and U+2028, U+2029 escaped.
func appendCompactHTML(b []byte, raw []byte) []byte {
	const hex = "0123456789abcdef"
	inString, escaped := false, false
	start := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			case c == '<' || c == '>' || c == '&':
				b = append(b, raw[start:i]...)
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
				start = i + 1
			case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
				b = append(b, raw[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hex[raw[i+2]&0xF])
				i += 2
				start = i + 1
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			b = append(b, raw[start:i]...)
			start = i + 1
		}
	}
	return append(b, raw[start:]...)
}
