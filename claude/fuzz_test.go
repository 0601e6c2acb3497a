package claude

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzPeekType: the type scan agrees with a full decode on every valid JSON
// object, and never panics on anything else.
func FuzzPeekType(f *testing.F) {
	for _, s := range []string{
		`{"type":"user","uuid":"u"}`, `{"a":{"type":"x"},"type":"attachment"}`, `{"type":"a\"b"}`,
		`{"x":"\\","type":"y"}`, `{"type":`, `[1]`, `"s"`, `{}`, `{"type":"user","message":{"content":[{"type":"text","text":"hi"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := PeekType(line)
		var obj map[string]json.RawMessage
		if json.Unmarshal(line, &obj) != nil || obj == nil {
			return
		}
		if err != nil {
			t.Fatalf("PeekType(%q) failed on a valid object: %v", line, err)
		}
		var want string
		if raw, ok := obj["type"]; ok {
			_ = json.Unmarshal(raw, &want)
		}
		// Duplicate keys: encoding/json keeps the last; the scan stops at the
		// first. Only compare when the key is unique.
		if got != want && countTypeKeys(line) <= 1 {
			t.Fatalf("PeekType(%q) = %q, decode says %q", line, got, want)
		}
		if _, err := Parse(line); err != nil && IsConversationType(got) {
			// A conversation record that is a valid object must parse.
			t.Fatalf("Parse(%q): %v", line, err)
		}
	})
}

func countTypeKeys(line []byte) int {
	dec := json.NewDecoder(bytesReader(line))
	n, depth := 0, 0
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				depth++
				expectKey = depth == 1
			case '}', ']':
				depth--
				expectKey = depth == 1
			case '[':
				depth++
			}
			continue
		case string:
			if depth == 1 && expectKey {
				if v == "type" {
					n++
				}
				expectKey = false
				continue
			}
		}
		if depth == 1 {
			expectKey = true
		}
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// FuzzParseTorn: a line that does not parse never panics, and a whole
// record appended to any prefix of another is read back whole.
func FuzzParseTorn(f *testing.F) {
	f.Add([]byte(`{"type":"assistant","uuid":"a","message":{"content":[{"type":"text","text":"x`), 10)
	f.Add([]byte(``), 0)
	f.Add([]byte(`{"{"`), 3)
	user := []byte(`{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"text","text":"two"}]}}`)
	f.Fuzz(func(t *testing.T, torn []byte, cut int) {
		Parse(torn)
		if cut < 0 || cut > len(torn) || json.Valid(torn[:cut]) || bytes.Contains(torn[:cut], []byte("\n")) {
			return
		}
		line := append(append([]byte(nil), torn[:cut]...), user...)
		r, err := Parse(line)
		if err != nil || r.UUID != "u2" {
			if json.Valid(line) {
				return // the prefix made one valid object of it: not torn
			}
			t.Fatalf("Parse(%q) = %+v, %v", line, r, err)
		}
	})
}
