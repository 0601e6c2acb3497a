package relay

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/ccrelay/ccrelay/protocol"
)

// How an envelope's body is kept on disk (envelopes.body). An envelope's
// JSON repeats the same keys and kinds in every row, and its id is already
// a column, so a body is stored as the JSON after its id, with each of a
// fixed list of frequent fragments replaced by one byte below 0x20 (bytes
// that valid JSON never holds outside escapes) and a sealed envelope's
// base64url text as the bytes it spells. Reading gives back the exact bytes
// stored; anything the encoding cannot hold exactly is kept as it came.
//
// The formats, by the first byte:
//
//	0x00  fragments (formatFragments): `{"id":"<id>"` is implied
//	0x01  the bytes that follow, as they came (a body that starts with a
//	      byte below 0x02)
//	else  the body as it came (every body versions before 6 stored)
//
// The fragment list is part of the format: never change or reorder it;
// a new list is a new format byte.
const (
	formatFragments = 0x00
	formatRaw       = 0x01
)

// fragments are the tokens 0x01.. of formatFragments, in order; tokSealed
// (0x1f) is a base64url run: a uvarint length, then the decoded bytes.
var fragments = [...]string{
	`,"time":17`,
	`,"time":`,
	`,"role":"agent","turn":"`,
	`,"role":"user"`,
	`,"role":"agent"`,
	`,"turn":"`,
	`","subagent":"`,
	`","ev":{"t":"`,
	`,"ev":{"t":"`,
	`text","text":"`,
	`"}}`,
	`"},"sealed":"`,
	`tool-call-start","call":"toolu_`,
	`tool-call-end","call":"toolu_`,
	`","name":"`,
	`","title":"`,
	`","description":"`,
	`","args":{"`,
	`","result":"`,
	`turn-end","status":"completed"}}`,
	`turn-start"}}`,
	`thinking","text":"`,
	`","claudeUuid":"`,
	`,"usage":{"input_tokens":`,
	`,"cache_creation_input_tokens":`,
	`,"cache_read_input_tokens":`,
	`,"output_tokens":`,
	`,"service_tier":"standard"`,
	`file_path":"`,
	`\n`,
}

const tokSealed = 0x1f

// tokSealedAfter is the fragment after which a base64url run is taken.
const tokSealedAfter = 12 // `"},"sealed":"`

// byFirst lists, for each first byte, the tokens whose fragment starts with
// it, longest first.
var byFirst = func() (m [256][]byte) {
	for i, f := range fragments {
		m[f[0]] = append(m[f[0]], byte(i+1))
	}
	for _, toks := range m {
		for i := 1; i < len(toks); i++ { // insertion sort by length, longest first
			for j := i; j > 0 && len(fragments[toks[j]-1]) > len(fragments[toks[j-1]-1]); j-- {
				toks[j], toks[j-1] = toks[j-1], toks[j]
			}
		}
	}
	return m
}()

// startsFragment says which two bytes some fragment starts with, by
// their value as a big-endian uint16 (every fragment is two bytes or
// more).
var startsFragment = func() (m [1 << 16]bool) {
	for _, f := range fragments {
		m[uint16(f[0])<<8|uint16(f[1])] = true
	}
	return m
}()

// encodeBody is body as stored, for an envelope whose id column is id.
func encodeBody(id string, body []byte) []byte {
	if out, ok := encodeFragments(nil, id, body); ok {
		return out
	}
	if len(body) > 0 && body[0] > formatRaw {
		return body
	}
	return append([]byte{formatRaw}, body...)
}

// encodeBodyInto is encodeBody written over buf's memory, grown as needed
// (a caller that stores one body after another reuses one buffer); it
// never returns body's own memory.
func encodeBodyInto(buf []byte, id string, body []byte) []byte {
	if out, ok := encodeFragments(buf, id, body); ok {
		return out
	}
	if len(body) > 0 && body[0] > formatRaw {
		return append(buf[:0], body...)
	}
	return append(append(buf[:0], formatRaw), body...)
}

// encodeFragments is body in formatFragments, over buf's memory, if its
// id comes first as the id column has it and it holds no control byte.
func encodeFragments(buf []byte, id string, body []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(body, []byte(`{"id":"`))
	if ok {
		rest, ok = bytes.CutPrefix(rest, []byte(id))
	}
	if ok {
		rest, ok = bytes.CutPrefix(rest, []byte(`"`))
	}
	if !ok || hasControl(rest) {
		return nil, false
	}
	return appendFragments(slices.Grow(buf[:0], len(rest)+1), rest), true
}

// hasControl says whether b holds a byte below 0x20 (in UTF-8 such a byte
// is always a character of its own).
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func appendFragments(out, rest []byte) []byte {
	out = append(out, formatFragments)
	for i := 0; i < len(rest); {
		// The run of bytes no fragment starts with, as it is.
		j := i
		for j+1 < len(rest) && !startsFragment[uint16(rest[j])<<8|uint16(rest[j+1])] {
			j++
		}
		if j+1 >= len(rest) {
			j = len(rest) // one byte left: every fragment is longer
		}
		out = append(out, rest[i:j]...)
		if i = j; i == len(rest) {
			break
		}
		tok := byte(0)
		for _, t := range byFirst[rest[i]] {
			if bytes.HasPrefix(rest[i:], []byte(fragments[t-1])) {
				tok = t
				break
			}
		}
		if tok == 0 {
			out = append(out, rest[i])
			i++
			continue
		}
		out = append(out, tok)
		i += len(fragments[tok-1])
		if tok == tokSealedAfter {
			n := 0
			for n < len(rest)-i && base64URLByte(rest[i+n]) {
				n++
			}
			if b, ok := sealedBytes(rest[i : i+n]); ok {
				out = append(out, tokSealed)
				out = binary.AppendUvarint(out, uint64(len(b)))
				out = append(out, b...)
				i += n
			}
		}
	}
	return out
}

// sealedBytes decodes base64url text that encodes back to exactly itself.
func sealedBytes(text []byte) ([]byte, bool) {
	if len(text) < 4 {
		return nil, false
	}
	b, err := base64.RawURLEncoding.Strict().AppendDecode(nil, text)
	if err != nil || base64.RawURLEncoding.EncodedLen(len(b)) != len(text) {
		return nil, false
	}
	return b, true
}

func base64URLByte(c byte) bool { return protocol.IsBase64URLByte(c) }

var errBadBody = errors.New("stored envelope body is damaged")

// decodeBody is the envelope stored as stored for id.
func decodeBody(id string, stored []byte) ([]byte, error) {
	if len(stored) == 0 || stored[0] > formatRaw {
		return stored, nil
	}
	if stored[0] == formatRaw {
		return stored[1:], nil
	}
	return appendBody(make([]byte, 0, len(stored)*2+len(id)+8), id, stored)
}

// appendBody appends to out the envelope stored as stored for id.
func appendBody(out []byte, id string, stored []byte) ([]byte, error) {
	if len(stored) == 0 || stored[0] > formatRaw {
		return append(out, stored...), nil
	}
	if stored[0] == formatRaw {
		return append(out, stored[1:]...), nil
	}
	out = append(out, `{"id":"`...)
	out = append(out, id...)
	out = append(out, '"')
	rest := stored[1:]
	for len(rest) > 0 {
		i := 0
		for i < len(rest) && rest[i] >= 0x20 {
			i++
		}
		out = append(out, rest[:i]...)
		if i == len(rest) {
			break
		}
		t := rest[i]
		rest = rest[i+1:]
		switch {
		case t == tokSealed:
			n, w := binary.Uvarint(rest)
			if w <= 0 || n > uint64(len(rest)-w) {
				return nil, errBadBody
			}
			out = base64.RawURLEncoding.AppendEncode(out, rest[w:w+int(n)])
			rest = rest[w+int(n):]
		case t >= 1 && int(t) <= len(fragments):
			out = append(out, fragments[t-1]...)
		default:
			return nil, errBadBody
		}
	}
	return out, nil
}
