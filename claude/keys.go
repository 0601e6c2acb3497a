package claude

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/ccrelay/ccrelay/internal/jsonscan"
)

// Key is the dedupe key of a record: its uuid for user, assistant and system
// records, and "summary: <leafUuid>: <summary>" for summaries (the literal
// form the existing scanner uses). Records with no identity return "".
func Key(r *Record) string {
	switch r.Type {
	case TypeSummary:
		if r.LeafUUID == "" && r.Summary == "" {
			return ""
		}
		return "summary: " + r.LeafUUID + ": " + r.Summary
	default:
		return r.UUID
	}
}

// MessageKey is the second dedupe key of assistant records (DECISIONS D5):
// the API message id plus a hash of the content, so the same API message
// written twice under a new uuid is forwarded once, while the content blocks
// of one message written as separate lines (same id, different content) are
// all kept. It is "" for records without a message id.
func MessageKey(r *Record) string {
	if r.Type != TypeAssistant || r.Message == nil || r.Message.ID == "" {
		return ""
	}
	sum := sha256.Sum256(r.Message.Content.Raw)
	return "msg:" + r.Message.ID + ":" + string(sum[:16])
}

// Dedupe remembers the keys of records already delivered. It stores a
// 64-bit hash per key (hash/maphash with a seed of the process: among a
// million keys, the chance that two differ and share it is below 1 in 10^7;
// the keys are never written anywhere, so the hash need not be the same
// across processes), the older ones
// in a sorted list, so that its memory is about 8 bytes per conversation
// record whatever their size. The zero value is ready to use.
//
// With Window set it remembers only about the last Window keys (at least
// Window - 8,192, at most Window): what a process that runs for weeks keeps
// per session (the scanner's, remote mode's) stays bounded. Repeats come
// close together (a message written on several lines, a line read again
// after a restart, or after a switch between local and remote mode); a
// record repeated from further back, as when a transcript rewritten from
// its start is read again, is passed on again, and the envelopes it maps
// to are stored once by id (by the relay, the outbox and the file outbox's
// readers).
type Dedupe struct {
	// Window bounds the keys remembered (0: every key; replay's).
	Window int

	recent map[uint64]struct{} // the newest keys
	sorted []uint64            // the others, in order (Window 0)
	// chunks hold the others with Window set: each the recent keys of
	// one merge, in order, the oldest first, dropped whole.
	chunks [][]uint64
}

// DedupeWindow is the Window of the Dedupes a long-running ccrelay keeps
// per session: 16,384 keys (a record has one or two), about 200 KB.
const DedupeWindow = 2 * dedupeRecent

// dedupeRecent is how many keys wait in Dedupe.recent before they are
// merged into Dedupe.sorted.
const dedupeRecent = 1 << 13

// keySeed seeds the hashes of the dedupe keys.
var keySeed = maphash.MakeSeed()

// keyHashes are the hashes of r's two keys (Key and MessageKey), computed
// from the record's fields without building the keys: ok1 and ok2 say
// which keys r has. Each key is hashed with a byte of its own kind first,
// and a message id with its length, so no two different keys hash the
// same bytes.
func keyHashes(r *Record) (h1, h2 uint64, ok1, ok2 bool) {
	var h maphash.Hash
	h.SetSeed(keySeed)
	switch r.Type {
	case TypeSummary:
		if r.LeafUUID != "" || r.Summary != "" {
			// "summary: <leafUuid>: <summary>", the key Key returns.
			h.WriteByte('s')
			h.WriteString("summary: ")
			h.WriteString(r.LeafUUID)
			h.WriteString(": ")
			h.WriteString(r.Summary)
			h1, ok1 = h.Sum64(), true
		}
	default:
		if r.UUID != "" {
			h.WriteByte('u')
			h.WriteString(r.UUID)
			h1, ok1 = h.Sum64(), true
		}
	}
	if r.Type == TypeAssistant && r.Message != nil && r.Message.ID != "" {
		h.Reset()
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(r.Message.ID)))
		h.WriteByte('m')
		h.Write(n[:])
		h.WriteString(r.Message.ID)
		h.Write(r.Message.Content.Raw)
		h2, ok2 = h.Sum64(), true
	}
	return h1, h2, ok1, ok2
}

func (d *Dedupe) has(h uint64) bool {
	if _, ok := d.recent[h]; ok {
		return true
	}
	if _, ok := slices.BinarySearch(d.sorted, h); ok {
		return true
	}
	for _, c := range d.chunks {
		if _, ok := slices.BinarySearch(c, h); ok {
			return true
		}
	}
	return false
}

func (d *Dedupe) add(h uint64) {
	if d.recent == nil {
		d.recent = make(map[uint64]struct{})
	}
	d.recent[h] = struct{}{}
	if len(d.recent) < dedupeRecent {
		return
	}
	// Merge the recent keys into the sorted list, from its end, in place.
	keys := make([]uint64, 0, len(d.recent))
	for k := range d.recent {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	clear(d.recent)
	if d.Window > 0 {
		// A chunk of its own; the oldest go while the rest make the window.
		d.chunks = append(d.chunks, keys)
		for n := d.chunkKeys(); len(d.chunks) > 1 && n > d.Window-dedupeRecent; n -= len(d.chunks[0]) {
			d.chunks[0] = nil
			d.chunks = d.chunks[1:]
		}
		return
	}
	n := len(d.sorted)
	d.sorted = slices.Grow(d.sorted, len(keys))[:n+len(keys)]
	i, j := n-1, len(keys)-1
	for k := len(d.sorted) - 1; j >= 0; k-- {
		if i >= 0 && d.sorted[i] > keys[j] {
			d.sorted[k] = d.sorted[i]
			i--
		} else {
			d.sorted[k] = keys[j]
			j--
		}
	}
}

// Seen reports whether r was delivered before, and remembers it otherwise.
// Records without any key are never duplicates.
func (d *Dedupe) Seen(r *Record) bool {
	h1, h2, ok1, ok2 := keyHashes(r)
	if (ok1 && d.has(h1)) || (ok2 && d.has(h2)) {
		return true
	}
	if ok1 {
		d.add(h1)
	}
	if ok2 {
		d.add(h2)
	}
	return false
}

// Has reports whether r was delivered before, without remembering it.
func (d *Dedupe) Has(r *Record) bool {
	h1, h2, ok1, ok2 := keyHashes(r)
	return (ok1 && d.has(h1)) || (ok2 && d.has(h2))
}

// Len is the number of keys remembered.
func (d *Dedupe) Len() int { return len(d.recent) + len(d.sorted) + d.chunkKeys() }

// chunkKeys is the number of keys in d.chunks.
func (d *Dedupe) chunkKeys() int {
	n := 0
	for _, c := range d.chunks {
		n += len(c)
	}
	return n
}

// ToolResultText returns the text of a tool_result block's content: the
// string itself, or the text blocks joined by newlines, with "[image]" for
// image blocks and "[<type>]" for other blocks.
func ToolResultText(content json.RawMessage) string {
	if len(content) == 0 {
		return ""
	}
	switch content[0] {
	case '"':
		s, _ := jsonscan.String(content)
		return s
	case '[':
		if text, ok := blocksText(content); ok {
			return text
		}
		return blocksTextDecoded(content)
	}
	return ""
}

// blocksText is ToolResultText of a list of blocks read by a scan: the
// same text as the decode of blocksTextDecoded gives. ok is false for what
// the scan leaves to that decode (invalid JSON, a value of the wrong type).
func blocksText(content []byte) (string, bool) {
	if !jsonscan.Valid(content) {
		return "", false
	}
	var sb strings.Builder
	n := 0
	err := jsonscan.EachElem(content, func(v []byte) error {
		if n > 0 {
			sb.WriteByte('\n')
		}
		n++
		if string(v) == "null" {
			return nil
		}
		if v[0] != '{' {
			return errWrongType
		}
		var typ, text string
		hasText := false
		err := jsonscan.EachMember(v, func(k, v []byte) error {
			switch {
			case foldEq(k, "type"):
				if string(v) == "null" {
					return nil
				}
				s, ok := jsonscan.String(v)
				if !ok {
					return errWrongType
				}
				typ = s
			case foldEq(k, "text"):
				if string(v) == "null" {
					hasText = false
					return nil
				}
				s, ok := jsonscan.String(v)
				if !ok {
					return errWrongType
				}
				text, hasText = s, true
			}
			return nil
		})
		if err != nil {
			return err
		}
		switch {
		case hasText:
			sb.WriteString(text)
		case typ != "":
			sb.WriteString("[" + typ + "]")
		}
		return nil
	})
	if err != nil {
		return "", false
	}
	return sb.String(), true
}

var errWrongType = errors.New("a value of another type")

// foldEq reports whether key matches name as encoding/json matches a key to
// a field: exactly or without regard to ASCII case (name is lower-case
// ASCII without k or s, the letters with non-ASCII folds).
func foldEq(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range key {
		if c := key[i] | 0x20; c != name[i] {
			return false
		}
	}
	return true
}

// blocksTextDecoded is ToolResultText of a list of blocks by a full decode.
func blocksTextDecoded(content []byte) string {
	var blocks []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteByte('\n')
		}
		switch {
		case b.Text != nil:
			sb.WriteString(*b.Text)
		case b.Type != "":
			sb.WriteString("[" + b.Type + "]")
		}
	}
	return sb.String()
}
