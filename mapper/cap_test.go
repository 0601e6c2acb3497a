package mapper

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// A tool input or a text larger than the relay takes in one envelope has a
// defined fate: capped, with its full size said, the envelope within
// protocol.MaxEnvelopeBytes and valid, the same every time it is mapped.
func TestLargeFieldsCapped(t *testing.T) {
	big := strings.Repeat("line of generated code\n", 12<<20/23) // ~12 MB
	content, _ := json.Marshal(big)
	nested := `{"edits":[` + strings.Repeat(`{"old":"a","new":"b"},`, 200_000) + `{"old":"a","new":"b"}]}`
	prompt, _ := json.Marshal(strings.Repeat("é", 3<<20))
	for _, tc := range []struct {
		name string
		line string
		kind protocol.Kind
		// cut: the CutKey member the args must carry (tool calls), or a
		// suffix the text ends with.
		cut  map[string]int
		text string
	}{
		{name: "12 MB Write", kind: protocol.KindToolCallStart, cut: map[string]int{"content": len(big)},
			line: `{"type":"assistant","uuid":"a1","timestamp":"2026-01-01T00:00:01Z","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_W","name":"Write","input":{"file_path":"/x/gen.go","content":` + string(content) + `}}]}}`},
		{name: "large nested input", kind: protocol.KindToolCallStart, cut: map[string]int{"input": len(nested)},
			line: `{"type":"assistant","uuid":"a2","timestamp":"2026-01-01T00:00:01Z","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"toolu_M","name":"MultiEdit","input":` + nested + `}]}}`},
		{name: "6 MB prompt", kind: protocol.KindText, text: "[ccrelay: text cut at 524288 of 6291456 bytes]",
			line: `{"type":"user","uuid":"u1","timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":` + string(prompt) + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []byte
			for range 2 {
				envs := New(testSession).Map(rec(t, tc.line))
				checkInvariants(t, envs)
				var got *protocol.Envelope
				for i := range envs {
					raw, err := envs[i].AppendJSON(nil)
					if err != nil {
						t.Fatal(err)
					}
					if len(raw) > protocol.MaxEnvelopeBytes {
						t.Fatalf("%s envelope is %d bytes, over %d", envs[i].Ev.T, len(raw), protocol.MaxEnvelopeBytes)
					}
					if envs[i].Ev.T == tc.kind {
						got = &envs[i]
						if first == nil {
							first = raw
						} else if string(first) != string(raw) {
							t.Fatal("capping is not deterministic")
						}
					}
				}
				if got == nil {
					t.Fatalf("no %s envelope", tc.kind)
				}
				if tc.cut != nil {
					var args map[string]json.RawMessage
					if err := json.Unmarshal(got.Ev.Args, &args); err != nil {
						t.Fatal(err)
					}
					var cut map[string]int
					json.Unmarshal(args[CutKey], &cut)
					if len(got.Ev.Args) > MaxArgsBytes || len(cut) != len(tc.cut) {
						t.Fatalf("args of %d bytes, cut %v, want %v", len(got.Ev.Args), cut, tc.cut)
					}
					for k, n := range tc.cut {
						if cut[k] != n {
							t.Fatalf("cut %v, want %v", cut, tc.cut)
						}
					}
				} else if !strings.HasSuffix(got.Ev.Text, tc.text) {
					t.Fatalf("text ends %q", got.Ev.Text[len(got.Ev.Text)-80:])
				}
			}
		})
	}
	// Below the bounds nothing changes.
	small := `{"type":"assistant","uuid":"a3","timestamp":"2026-01-01T00:00:01Z","message":{"id":"m3","role":"assistant","content":[{"type":"tool_use","id":"toolu_S","name":"Write","input":{"file_path":"/x","content":"hi"}}]}}`
	for _, e := range New(testSession).Map(rec(t, small)) {
		if e.Ev.T == protocol.KindToolCallStart && string(e.Ev.Args) != `{"file_path":"/x","content":"hi"}` {
			t.Fatalf("small args changed: %s", e.Ev.Args)
		}
	}
}
