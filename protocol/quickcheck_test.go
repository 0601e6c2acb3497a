package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fullCheck is what QuickCheck stands in for: the full decoding and
// Validate.
func fullCheck(raw []byte) (string, error) {
	var e Envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		return "", err
	}
	if err := e.Validate(); err != nil {
		return "", err
	}
	return e.ID, nil
}

func TestQuickCheck(t *testing.T) {
	long := strings.Repeat("x", MaxResultBytes)
	tests := []struct {
		name string
		raw  string
		want bool // decided valid by QuickCheck (else left to the full decoding)
	}{
		{"text", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, true},
		{"text with spaces and escapes", ` { "id" : "ca" , "time" : 0 , "role" : "agent" , "turn" : "ct" , "ev" : { "t" : "text" , "text" : "a\n\"b\"\u00e9\ud83d\ude00" , "thinking" : true } } `, true},
		{"usage", `{"id":"ca","time":1,"role":"agent","usage":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":7,"service_tier":"standard","context_window":200000},"ev":{"t":"text","text":""}}`, true},
		{"tool-call-start", `{"id":"ca","time":4,"role":"agent","ev":{"t":"tool-call-start","call":"toolu_1","name":"Bash","title":"Bash","description":"ls","args":{"command":["ls",1.5e3,null,true,{}]}}}`, true},
		{"tool-call-end", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"toolu_1","error":true,"result":"boom","truncated":true,"full":10}}`, true},
		{"tool-call-end result at the bound", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","result":"` + long + `"}}`, true},
		{"tool-call-end escaped result at the bound", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","result":"` + strings.Repeat(`\n`, MaxResultBytes) + `"}}`, true},
		{"turn-end", `{"id":"ca","time":8,"role":"agent","ev":{"t":"turn-end","status":"completed"}}`, true},
		{"turn-start", `{"id":"ca","time":8,"role":"agent","ev":{"t":"turn-start","unknown":[1,{"a":null}]}}`, true},
		{"start", `{"id":"ca","time":8,"role":"agent","ev":{"t":"start","title":"x"}}`, true},
		{"stop", `{"id":"ca","time":8,"role":"agent","subagent":"cs","claudeUuid":"u-\u0031","ev":{"t":"stop"}}`, true},
		{"service", `{"id":"ca","time":8,"role":"agent","ev":{"t":"service","text":"x"}}`, true},
		{"diff", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","result":"ok","diff":{"path":"a/b.go","op":"update","hunks":[{"oldStart":3,"oldLines":2,"newStart":3,"newLines":3,"lines":[" a","-b","+c\td","+\u00e9"]},{"lines":[]}],"truncated":true}}}`, true},
		{"diff with spaces", `{"id":"ca","time":5,"role":"agent","ev":{"diff" : { "op" : "create" , "hunks" : [ ] , "path" : "" } ,"t":"tool-call-end","call":"c"}}`, true},
		{"diff of another kind", `{"id":"ca","time":5,"role":"agent","ev":{"t":"text","text":"x","diff":{"op":"create"}}}`, true},
		{"diff lines at the bounds", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{"lines":["` + strings.Repeat("x", MaxDiffLineBytes) + `"` + strings.Repeat(`,"`+strings.Repeat("y", 64)+`"`, 991) + `]}]}}}`, true},

		// Refused by the full decoding: QuickCheck leaves them to it.
		{"result too long", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","result":"` + long + `x"}}`, false},
		{"escaped result too long", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","result":"` + strings.Repeat(`\u00e9`, MaxResultBytes/2) + `x"}}`, false},
		{"full without truncated", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","result":"r","full":3}}`, false},
		{"truncated without result", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","truncated":true}}`, false},
		{"full too large", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","result":"r","truncated":true,"full":1048577}}`, false},
		{"diff without op", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"path":"a","hunks":[]}}}`, false},
		{"diff bad op", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"delete"}}}`, false},
		{"diff path too long", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","path":"` + strings.Repeat("p", MaxDetailBytes+1) + `"}}}`, false},
		{"diff negative start", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{"oldStart":-1}]}}}`, false},
		{"diff line too long", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{"lines":["` + strings.Repeat("x", MaxDiffLineBytes+1) + `"]}]}}}`, false},
		{"diff too many hunks", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{}` + strings.Repeat(",{}", MaxDiffHunks) + `]}}}`, false},
		{"diff too many lines", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{"lines":[""` + strings.Repeat(`,""`, MaxDiffLines) + `]}]}}}`, false},
		{"diff too many bytes", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{"lines":["` + strings.Repeat("x", 2000) + `"` + strings.Repeat(`,"`+strings.Repeat("x", 2000)+`"`, MaxDiffBytes/2000) + `]}]}}}`, false},
		{"diff line not a string", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{"lines":[1]}]}}}`, false},
		{"diff truncated not a boolean", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","truncated":"yes"}}}`, false},
		{"diff not an object", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":[]}}`, false},
		{"bad id", `{"id":"Ca","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"bad turn", `{"id":"ca","time":1,"role":"user","turn":"1","ev":{"t":"text","text":"hi"}}`, false},
		{"bad role", `{"id":"ca","time":1,"role":"bot","ev":{"t":"text","text":"hi"}}`, false},
		{"service as user", `{"id":"ca","time":1,"role":"user","ev":{"t":"service","text":"hi"}}`, false},
		{"stop as user", `{"id":"ca","time":1,"role":"user","ev":{"t":"stop"}}`, false},
		{"no text", `{"id":"ca","time":1,"role":"user","ev":{"t":"text"}}`, false},
		{"text not a string", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":1}}`, false},
		{"thinking not a boolean", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"","thinking":"yes"}}`, false},
		{"no time", `{"id":"ca","role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"negative time", `{"id":"ca","time":-1,"role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"empty call", `{"id":"ca","time":4,"role":"agent","ev":{"t":"tool-call-start","call":"","name":"B","title":"B","description":"d","args":{}}}`, false},
		{"args not an object", `{"id":"ca","time":4,"role":"agent","ev":{"t":"tool-call-start","call":"c","name":"B","title":"B","description":"d","args":[]}}`, false},
		{"bad status", `{"id":"ca","time":8,"role":"agent","ev":{"t":"turn-end","status":"canceled"}}`, false},
		{"unknown kind", `{"id":"ca","time":8,"role":"agent","ev":{"t":"nap"}}`, false},
		{"usage without output", `{"id":"ca","time":1,"role":"agent","usage":{"input_tokens":3},"ev":{"t":"text","text":""}}`, false},
		{"usage with more", `{"id":"ca","time":1,"role":"agent","usage":{"input_tokens":3,"output_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":0},"x":[null]},"ev":{"t":"text","text":""}}`, true},
		{"usage zero window", `{"id":"ca","time":1,"role":"agent","usage":{"input_tokens":3,"output_tokens":1,"context_window":0},"ev":{"t":"text","text":""}}`, false},
		{"control character", "{\"id\":\"ca\",\"time\":1,\"role\":\"user\",\"ev\":{\"t\":\"text\",\"text\":\"a\x01\"}}", false},
		{"bad escape", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"\x"}}`, false},
		{"trailing bytes", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"hi"}} x`, false},
		{"cut", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"hi"}`, false},
		{"leading zero", `{"id":"ca","time":01,"role":"user","ev":{"t":"text","text":"hi"}}`, false},

		// Accepted by the full decoding, but not decided here.
		{"fraction", `{"id":"ca","time":1.5,"role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"null turn", `{"id":"ca","time":1,"role":"user","turn":null,"ev":{"t":"text","text":"hi"}}`, false},
		{"key in capitals", `{"ID":"ca","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"duplicate key", `{"id":"ca","id":"cb","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"escaped id", `{"id":"c\u0061","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"command", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"/x","command":{"name":"x"}}}`, false},
		{"diff null", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":null}}`, false},
		{"diff path null", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"path":null,"op":"create"}}}`, false},
		{"diff key in capitals", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"Path":"a","op":"create"}}}`, false},
		{"diff unknown key", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","more":1}}}`, false},
		{"diff hunk unknown key", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[{"oldstart":1}]}}}`, false},
		{"diff duplicate op", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","op":"update"}}}`, false},
		{"two diffs", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create"},"diff":{"op":"create"}}}`, false},
		{"diff hunk null", `{"id":"ca","time":5,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"create","hunks":[null]}}}`, false},
		{"file", `{"id":"ca","time":6,"role":"user","ev":{"t":"file","ref":"ca","name":"a.png","size":10}}`, false},
		{"invalid UTF-8", "{\"id\":\"ca\",\"time\":1,\"role\":\"user\",\"ev\":{\"t\":\"text\",\"text\":\"\xff\"}}", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, ok := QuickCheck([]byte(tc.raw))
			if ok != tc.want {
				t.Fatalf("QuickCheck = %v, want %v", ok, tc.want)
			}
			fid, err := fullCheck([]byte(tc.raw))
			if ok && (err != nil || fid != id) {
				t.Fatalf("QuickCheck took it as %q; the full decoding: %q, %v", id, fid, err)
			}
		})
	}
}

// goldenEnvelopes are the envelopes of the mapper's golden files.
func goldenEnvelopes(tb testing.TB) [][]byte {
	var out [][]byte
	var paths []string
	filepath.WalkDir("../testdata/golden", func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".golden.jsonl") {
			paths = append(paths, p)
		}
		return err
	})
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, MaxEnvelopeBytes)
		for sc.Scan() {
			out = append(out, bytes.Clone(sc.Bytes()))
		}
		f.Close()
	}
	if len(out) < 1000 {
		tb.Fatalf("%d golden envelopes", len(out))
	}
	return out
}

// On the real envelopes and on every one of them changed a byte at a
// time, QuickCheck never accepts what the full decoding refuses (nor
// gives another id), and it decides most real envelopes.
func TestQuickCheckAgreesWithFullDecoding(t *testing.T) {
	gold := goldenEnvelopes(t)
	decided, checked := 0, 0
	check := func(raw []byte) {
		checked++
		id, ok := QuickCheck(raw)
		if !ok {
			return
		}
		fid, err := fullCheck(raw)
		if err != nil || fid != id {
			t.Fatalf("QuickCheck took %s as %q; the full decoding: %q, %v", raw, id, fid, err)
		}
	}
	for _, raw := range gold {
		if _, ok := QuickCheck(raw); ok {
			decided++
		}
		check(raw)
	}
	t.Logf("%d of %d real envelopes decided in one pass", decided, len(gold))
	if decided < len(gold)*9/10 {
		t.Errorf("QuickCheck decided %d of %d real envelopes, want at least 90%%", decided, len(gold))
	}
	// Each byte of a sample of envelopes replaced by others that matter to
	// JSON, or removed.
	// The first few with a diff are changed too.
	subst := []byte{'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '0', '-', '.', 'e', 'n', 't', 'x', 'A', 0x01, 0xff}
	diffs := 0
	for n, raw := range gold {
		withDiff := diffs < 6 && len(raw) <= 1500 && bytes.Contains(raw, []byte(`"diff":{`))
		if withDiff {
			diffs++
		} else if n%80 != 0 || len(raw) > 700 {
			continue
		}
		for i := range raw {
			for _, c := range subst {
				m := bytes.Clone(raw)
				m[i] = c
				check(m)
			}
			check(append(bytes.Clone(raw[:i]), raw[i+1:]...))
		}
	}
	t.Logf("%d envelopes checked, %d of them with a diff changed", checked, diffs)
	if diffs == 0 {
		t.Error("no real envelope with a diff was changed")
	}
}

func FuzzQuickCheck(f *testing.F) {
	for _, raw := range goldenEnvelopes(f) {
		if len(raw) < 2000 {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		id, ok := QuickCheck(raw)
		if !ok {
			return
		}
		fid, err := fullCheck(raw)
		if err != nil || fid != id {
			t.Fatalf("QuickCheck took %q as %q; the full decoding: %q, %v", raw, id, fid, err)
		}
	})
}

func BenchmarkQuickCheck(b *testing.B) {
	gold := goldenEnvelopes(b)
	var n int64
	for _, raw := range gold {
		n += int64(len(raw))
	}
	b.Run("quick", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			for _, raw := range gold {
				if _, ok := QuickCheck(raw); !ok {
					fullCheck(raw)
				}
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			for _, raw := range gold {
				fullCheck(raw)
			}
		}
	})
}
