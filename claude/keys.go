package claude

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
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
// 16-byte hash per key, so its memory is bounded by the number of
// conversation records, not their size. The zero value is ready to use.
type Dedupe struct {
	seen map[[16]byte]struct{}
}

func hashKey(k string) [16]byte {
	sum := sha256.Sum256([]byte(k))
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}

// Seen reports whether r was delivered before, and remembers it otherwise.
// Records without any key are never duplicates.
func (d *Dedupe) Seen(r *Record) bool {
	k1, k2 := Key(r), MessageKey(r)
	if k1 == "" && k2 == "" {
		return false
	}
	if d.seen == nil {
		d.seen = make(map[[16]byte]struct{})
	}
	dup := false
	for _, k := range [2]string{k1, k2} {
		if k == "" {
			continue
		}
		h := hashKey(k)
		if _, ok := d.seen[h]; ok {
			dup = true
		}
	}
	if dup {
		return true
	}
	for _, k := range [2]string{k1, k2} {
		if k != "" {
			d.seen[hashKey(k)] = struct{}{}
		}
	}
	return false
}

// Has reports whether r was delivered before, without remembering it.
func (d *Dedupe) Has(r *Record) bool {
	for _, k := range [2]string{Key(r), MessageKey(r)} {
		if k == "" || d.seen == nil {
			continue
		}
		if _, ok := d.seen[hashKey(k)]; ok {
			return true
		}
	}
	return false
}

// Len is the number of keys remembered.
func (d *Dedupe) Len() int { return len(d.seen) }

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
