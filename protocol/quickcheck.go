package protocol

import (
	"unicode/utf8"
)

// QuickCheck decides, in one pass over raw and without decoding it, that
// raw is an envelope's JSON that json.Unmarshal into an Envelope and
// Validate both accept, for the envelopes a CLI sends all the time (text,
// thinking, tool calls and the diffs of their ends, turns, service notes
// without details, start and stop, with or without usage). It returns the
// envelope's id and true then. It returns false for everything else:
// anything invalid, and anything it does not decide (escaped keys or ids,
// null, a number that is not a plain integer, duplicate or unknown keys,
// file envelopes, commands, API errors, compactions). The caller
// decodes those in full, which gives the answer and its error: QuickCheck
// never accepts an envelope the full decoding refuses.
func QuickCheck(raw []byte) (id string, ok bool) {
	q := quick{b: raw}
	var env quickEnvelope
	if !q.envelope(&env) {
		return "", false
	}
	q.ws()
	if q.i != len(q.b) || !env.valid() {
		return "", false
	}
	return string(env.id), true
}

// quick scans JSON bytes; every method reports false for what it does not
// decide.
type quick struct {
	b []byte
	i int
}

// quickString is a scanned JSON string: its bytes between the quotes, and
// what decoding it would give as far as checks need.
type quickString struct {
	raw     []byte // between the quotes
	escaped bool   // holds an escape (raw is not its value)
	n       int    // the length of its value in bytes
}

type quickEnvelope struct {
	id, role, turn, subagent                 []byte // within the scanned bytes
	usageOK                                  bool
	ev                                       quickEvent
	hasTime, hasID, hasRole, hasEv, hasUsage bool
}

// Keys of an event, by bit.
const (
	evT = 1 << iota
	evText
	evThinking
	evCall
	evName
	evTitle
	evDescription
	evArgs
	evError
	evResult
	evTruncated
	evFull
	evStatus
	evDiff
)

type quickEvent struct {
	seen       uint32
	t, status  []byte // within the scanned bytes
	str        uint32 // keys whose value is a string
	nonEmpty   uint32 // keys whose string value is not empty
	boolTrue   uint32 // keys whose value is true
	boolean    uint32 // keys whose value is a boolean
	object     uint32 // keys whose value is an object
	resultLen  int
	full       int64
	fullIsPlan bool // full is a plain integer
}

func (q *quick) ws() {
	for q.i < len(q.b) {
		switch q.b[q.i] {
		case ' ', '\t', '\r', '\n':
			q.i++
		default:
			return
		}
	}
}

// byte takes c after white space.
func (q *quick) byte(c byte) bool {
	q.ws()
	if q.i < len(q.b) && q.b[q.i] == c {
		q.i++
		return true
	}
	return false
}

func (q *quick) peek() byte {
	q.ws()
	if q.i < len(q.b) {
		return q.b[q.i]
	}
	return 0
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hexRune(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// string scans a JSON string in valid UTF-8, and the length of its value
// as encoding/json decodes it.
func (q *quick) string(s *quickString) bool {
	if !q.byte('"') {
		return false
	}
	start := q.i
	*s = quickString{}
	for q.i < len(q.b) {
		c := q.b[q.i]
		switch {
		case c == '"':
			s.raw = q.b[start:q.i]
			q.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.escaped = true
			if q.i+1 >= len(q.b) {
				return false
			}
			switch q.b[q.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.n++
				q.i += 2
			case 'u':
				if q.i+6 > len(q.b) || !isHex(q.b[q.i+2]) || !isHex(q.b[q.i+3]) || !isHex(q.b[q.i+4]) || !isHex(q.b[q.i+5]) {
					return false
				}
				r := hexRune(q.b[q.i+2 : q.i+6])
				q.i += 6
				switch {
				case r >= 0xd800 && r < 0xdc00 && q.i+6 <= len(q.b) && q.b[q.i] == '\\' && q.b[q.i+1] == 'u' &&
					isHex(q.b[q.i+2]) && isHex(q.b[q.i+3]) && isHex(q.b[q.i+4]) && isHex(q.b[q.i+5]) &&
					hexRune(q.b[q.i+2:q.i+6]) >= 0xdc00 && hexRune(q.b[q.i+2:q.i+6]) < 0xe000:
					s.n += 4 // a surrogate pair
					q.i += 6
				case r >= 0xd800 && r < 0xe000:
					s.n += 3 // a lone surrogate: U+FFFD
				default:
					s.n += utf8.RuneLen(r)
				}
			default:
				return false
			}
		case c < utf8.RuneSelf:
			s.n++
			q.i++
		default:
			r, size := utf8.DecodeRune(q.b[q.i:])
			if r == utf8.RuneError && size == 1 {
				return false // decoded as U+FFFD: not decided here
			}
			s.n += size
			q.i += size
		}
	}
	return false
}

// key scans an object's key without escapes and its colon.
func (q *quick) key() ([]byte, bool) {
	var s quickString
	if !q.string(&s) || s.escaped || !q.byte(':') {
		return nil, false
	}
	return s.raw, true
}

// plainInt scans a non-negative integer without sign, fraction or
// exponent, of at most 15 digits (exact as a float64).
func (q *quick) plainInt() (int64, bool) {
	q.ws()
	start := q.i
	var v int64
	for q.i < len(q.b) && q.b[q.i] >= '0' && q.b[q.i] <= '9' {
		v = v*10 + int64(q.b[q.i]-'0')
		q.i++
	}
	n := q.i - start
	if n == 0 || n > 15 || (n > 1 && q.b[start] == '0') {
		return 0, false
	}
	if q.i < len(q.b) {
		switch q.b[q.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return v, true
}

// boolean scans true or false.
func (q *quick) boolean() (v, ok bool) {
	q.ws()
	rest := q.b[q.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		q.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		q.i += 5
		return false, true
	}
	return false, false
}

// maxQuickDepth bounds the nesting skipValue follows (the rest is not
// decided here).
const maxQuickDepth = 64

// skipValue scans any JSON value.
func (q *quick) skipValue(depth int) bool {
	if depth > maxQuickDepth {
		return false
	}
	switch c := q.peek(); {
	case c == '"':
		var s quickString
		return q.string(&s)
	case c == '{':
		q.i++
		if q.byte('}') {
			return true
		}
		for {
			var s quickString
			if !q.string(&s) || !q.byte(':') || !q.skipValue(depth+1) {
				return false
			}
			if q.byte('}') {
				return true
			}
			if !q.byte(',') {
				return false
			}
		}
	case c == '[':
		q.i++
		if q.byte(']') {
			return true
		}
		for {
			if !q.skipValue(depth + 1) {
				return false
			}
			if q.byte(']') {
				return true
			}
			if !q.byte(',') {
				return false
			}
		}
	case c == 't' || c == 'f':
		_, ok := q.boolean()
		return ok
	case c == 'n':
		if len(q.b)-q.i >= 4 && string(q.b[q.i:q.i+4]) == "null" {
			q.i += 4
			return true
		}
		return false
	case c == '-' || c >= '0' && c <= '9':
		return q.number()
	}
	return false
}

// number scans a JSON number as its grammar has it.
func (q *quick) number() bool {
	digits := func() int {
		n := 0
		for q.i < len(q.b) && q.b[q.i] >= '0' && q.b[q.i] <= '9' {
			q.i++
			n++
		}
		return n
	}
	if q.i < len(q.b) && q.b[q.i] == '-' {
		q.i++
	}
	start := q.i
	n := digits()
	if n == 0 || (n > 1 && q.b[start] == '0') {
		return false
	}
	if q.i < len(q.b) && q.b[q.i] == '.' {
		q.i++
		if digits() == 0 {
			return false
		}
	}
	if q.i < len(q.b) && (q.b[q.i] == 'e' || q.b[q.i] == 'E') {
		q.i++
		if q.i < len(q.b) && (q.b[q.i] == '+' || q.b[q.i] == '-') {
			q.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// object scans an object whose keys have no escape and appear once,
// calling field for each key with the scanner at its value.
func (q *quick) object(field func(key []byte) bool) bool {
	if !q.byte('{') {
		return false
	}
	if q.byte('}') {
		return true
	}
	for {
		k, ok := q.key()
		if !ok || !field(k) {
			return false
		}
		if q.byte('}') {
			return true
		}
		if !q.byte(',') {
			return false
		}
	}
}

func (q *quick) envelope(e *quickEnvelope) bool {
	var seen uint8 // the keys seen (a duplicate is not decided here)
	return q.object(func(k []byte) bool {
		bit := uint8(0)
		switch string(k) {
		case "id":
			bit = 1
		case "time":
			bit = 2
		case "role":
			bit = 4
		case "turn":
			bit = 8
		case "subagent":
			bit = 16
		case "claudeUuid":
			bit = 32
		case "usage":
			bit = 64
		case "ev":
			bit = 128
		default:
			return false // an unknown key (encoding/json matches keys without case)
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		var s quickString
		switch string(k) {
		case "id":
			if !q.string(&s) {
				return false
			}
			e.id, e.hasID = s.raw, !s.escaped
			return e.hasID
		case "time":
			_, ok := q.plainInt()
			e.hasTime = ok
			return ok
		case "role":
			if !q.string(&s) || s.escaped {
				return false
			}
			e.role, e.hasRole = s.raw, true
			return true
		case "turn", "subagent":
			if !q.string(&s) || s.escaped {
				return false
			}
			if string(k) == "turn" {
				e.turn = s.raw
			} else {
				e.subagent = s.raw
			}
			return true
		case "claudeUuid":
			return q.string(&s)
		case "usage":
			e.hasUsage = true
			e.usageOK = q.usage()
			return e.usageOK
		case "ev":
			e.hasEv = true
			return q.event(&e.ev)
		}
		return false // an unknown key (encoding/json matches keys without case)
	})
}

// usage scans a usage object: its known keys each a plain integer (the
// service tier a string), with both token counts and a positive context
// window; the others any JSON.
func (q *quick) usage() bool {
	var seen uint8
	ok := q.object(func(k []byte) bool {
		bit := uint8(0)
		switch string(k) {
		case "input_tokens":
			bit = 1
		case "output_tokens":
			bit = 2
		case "cache_creation_input_tokens":
			bit = 4
		case "cache_read_input_tokens":
			bit = 8
		case "context_window":
			bit = 16
		case "service_tier":
			bit = 32
		default:
			return q.skipValue(0) // kept as it is (Usage.Extra)
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		if bit == 32 {
			var s quickString
			return q.string(&s)
		}
		v, ok := q.plainInt()
		return ok && (bit != 16 || v > 0)
	})
	return ok && seen&3 == 3
}

func (q *quick) event(ev *quickEvent) bool {
	return q.object(func(k []byte) bool {
		bit := uint32(0)
		switch string(k) {
		case "t":
			bit = evT
		case "text":
			bit = evText
		case "thinking":
			bit = evThinking
		case "call":
			bit = evCall
		case "name":
			bit = evName
		case "title":
			bit = evTitle
		case "description":
			bit = evDescription
		case "args":
			bit = evArgs
		case "error":
			bit = evError
		case "result":
			bit = evResult
		case "truncated":
			bit = evTruncated
		case "full":
			bit = evFull
		case "status":
			bit = evStatus
		case "diff":
			if ev.seen&evDiff != 0 {
				return false
			}
			ev.seen |= evDiff
			return q.diff()
		case "command", "apiError", "compaction", "ref", "size", "mimeType", "image":
			return false // details not decided here
		default:
			return q.skipValue(0) // a key no kind reads
		}
		if ev.seen&bit != 0 {
			return false
		}
		ev.seen |= bit
		switch c := q.peek(); {
		case c == '"':
			var s quickString
			if !q.string(&s) {
				return false
			}
			ev.str |= bit
			if s.n > 0 {
				ev.nonEmpty |= bit
			}
			switch bit {
			case evT, evStatus:
				if s.escaped {
					return false
				}
				if bit == evT {
					ev.t = s.raw
				} else {
					ev.status = s.raw
				}
			case evResult:
				ev.resultLen = s.n
			}
			return true
		case c == 't' || c == 'f':
			v, ok := q.boolean()
			ev.boolean |= bit
			if v {
				ev.boolTrue |= bit
			}
			return ok
		case c == '{':
			ev.object |= bit
			return q.skipValue(0)
		case c >= '0' && c <= '9' && bit == evFull:
			v, ok := q.plainInt()
			ev.full, ev.fullIsPlan = v, ok
			return ok
		}
		return false // null, arrays and other numbers: not decided here
	})
}

// diff scans a tool-call-end's diff that decodeDiff and Diff.validate
// accept: an object of path (a string), op (create or update), truncated
// (a boolean) and hunks (an array of objects of plain integers oldStart,
// oldLines, newStart and newLines and lines, an array of strings), within
// the diff's bounds. Null, unknown keys (a struct's fields are matched
// without case) and duplicates are not decided here.
func (q *quick) diff() bool {
	var seen uint8
	hunks, lines, size := 0, 0, 0
	ok := q.object(func(k []byte) bool {
		bit := uint8(0)
		switch string(k) {
		case "path":
			bit = 1
		case "op":
			bit = 2
		case "truncated":
			bit = 4
		case "hunks":
			bit = 8
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		var s quickString
		switch bit {
		case 1:
			return q.string(&s) && s.n <= MaxDetailBytes
		case 2:
			return q.string(&s) && !s.escaped && (string(s.raw) == DiffCreate || string(s.raw) == DiffUpdate)
		case 4:
			_, ok := q.boolean()
			return ok
		}
		return q.array(func() bool {
			if hunks++; hunks > MaxDiffHunks {
				return false
			}
			var hseen uint8
			return q.object(func(k []byte) bool {
				bit := uint8(0)
				switch string(k) {
				case "oldStart":
					bit = 1
				case "oldLines":
					bit = 2
				case "newStart":
					bit = 4
				case "newLines":
					bit = 8
				case "lines":
					bit = 16
				default:
					return false
				}
				if hseen&bit != 0 {
					return false
				}
				hseen |= bit
				if bit != 16 {
					_, ok := q.plainInt()
					return ok
				}
				return q.array(func() bool {
					var s quickString
					if !q.string(&s) || s.n > MaxDiffLineBytes {
						return false
					}
					lines++
					size += s.n
					return lines <= MaxDiffLines && size <= MaxDiffBytes
				})
			})
		})
	})
	return ok && seen&2 != 0
}

// array scans an array, calling elem for each element with the scanner
// at it.
func (q *quick) array(elem func() bool) bool {
	if !q.byte('[') {
		return false
	}
	if q.byte(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if q.byte(']') {
			return true
		}
		if !q.byte(',') {
			return false
		}
	}
}

// valid applies Validate's rules to what was scanned.
func (e *quickEnvelope) valid() bool {
	if !e.hasID || !e.hasTime || !e.hasRole || !e.hasEv || !isCuidBytes(e.id) {
		return false
	}
	agent := string(e.role) == string(RoleAgent)
	if !agent && string(e.role) != string(RoleUser) {
		return false
	}
	if len(e.turn) > 0 && !isCuidBytes(e.turn) || len(e.subagent) > 0 && !isCuidBytes(e.subagent) {
		return false
	}
	if e.hasUsage && !e.usageOK {
		return false
	}
	ev := &e.ev
	// A key the kind reads is a string (want) or a boolean (flags) when
	// present; required ones are present.
	str := func(want uint32) bool { return ev.seen&want == ev.str&want }
	flags := func(want uint32) bool { return ev.seen&want == ev.boolean&want }
	has := func(want uint32) bool { return ev.seen&want == want }
	if !has(evT) {
		return false
	}
	switch string(ev.t) { // no copy: a conversion in a switch
	case string(KindText):
		return has(evText) && str(evText) && flags(evThinking)
	case string(KindService):
		return agent && has(evText) && str(evText)
	case string(KindStart):
		return agent && str(evTitle)
	case string(KindStop):
		return agent
	case string(KindTurnStart):
		return true
	case string(KindTurnEnd):
		return has(evStatus) && str(evStatus) && validStatus(ev.status)
	case string(KindToolCallStart):
		need := uint32(evCall | evName | evTitle | evDescription)
		return has(need) && str(need) && ev.nonEmpty&need == need && ev.object&evArgs != 0
	case string(KindToolCallEnd):
		if !has(evCall) || !str(evCall|evResult) || ev.nonEmpty&evCall == 0 || !flags(evError|evTruncated) {
			return false
		}
		if ev.seen&evResult != 0 && ev.resultLen > MaxResultBytes {
			return false
		}
		truncated := ev.boolTrue&evTruncated != 0
		if truncated && ev.seen&evResult == 0 {
			return false
		}
		if ev.seen&evFull != 0 {
			if !ev.fullIsPlan || ev.full > MaxFullResultBytes || ev.full > 0 && !truncated {
				return false
			}
		}
		return true
	}
	return false // file, and unknown kinds: decoded in full
}

// isCuidBytes is IsCuid of b.
func isCuidBytes(b []byte) bool {
	if len(b) < cuidMinLen || len(b) > cuidMaxLen || b[0] < 'a' || b[0] > 'z' {
		return false
	}
	for _, c := range b[1:] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// validStatus is TurnStatus.Valid of b.
func validStatus(b []byte) bool {
	switch string(b) {
	case string(StatusCompleted), string(StatusFailed), string(StatusCancelled):
		return true
	}
	return false
}
