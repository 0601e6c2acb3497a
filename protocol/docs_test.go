package protocol

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Every envelope example in docs/protocol.md decodes, validates and
// re-encodes to the same bytes, and every event kind has an example.
func TestProtocolDocExamples(t *testing.T) {
	f, err := os.Open("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[Kind]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var pending string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, `{"id":`) {
			pending = line
		} else if pending != "" && strings.HasPrefix(line, `"`) {
			pending += line // an example wrapped over lines
		} else {
			pending = ""
			continue
		}
		var e Envelope
		if err := json.Unmarshal([]byte(pending), &e); err != nil {
			continue // not complete yet
		}
		if err := e.Validate(); err != nil {
			t.Errorf("doc example invalid: %v\n%s", err, pending)
		}
		again, _ := json.Marshal(e)
		var a, b any
		_ = json.Unmarshal(again, &a)
		_ = json.Unmarshal([]byte(pending), &b)
		if ja, jb := mustJSON(a), mustJSON(b); ja != jb {
			t.Errorf("doc example does not round-trip:\n doc %s\n got %s", jb, ja)
		}
		seen[e.Ev.T] = true
		pending = ""
	}
	for _, k := range Kinds {
		if !seen[k] {
			t.Errorf("docs/protocol.md has no example of %s", k)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
