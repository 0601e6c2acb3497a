package protocol

import (
	"encoding/json"
	"testing"
)

// An envelope whose key differs from a field's name only in case (or by a
// Unicode fold such as U+017F for s) is refused: encoding/json would take
// it for that field, the app's JSON.parse would not, so the relay would
// check one value and the app read another.
func TestEnvelopeKeyCaseRefused(t *testing.T) {
	tests := []struct {
		name, raw string
		ok        bool
	}{
		{"plain", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, true},
		{"escaped key is the same key", `{"\u0069d":"ca","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, true},
		{"unknown key", `{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"hi"},"x":1}`, true},
		{"second id in capitals", `{"id":"ca","ID":"cb","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"unchecked ev beside Ev", `{"id":"ca","time":1,"role":"user","ev":{"t":"nonsense"},"Ev":{"t":"text","text":"hi"}}`, false},
		{"role folded", `{"id":"ca","time":1,"Role":"agent","role":"user","ev":{"t":"text","text":"hi"}}`, false},
		{"long s", "{\"id\":\"ca\",\"time\":1,\"role\":\"agent\",\"\u017fubagent\":\"cs\",\"ev\":{\"t\":\"text\",\"text\":\"hi\"}}", false},
		{"usage folded", `{"id":"ca","time":1,"role":"agent","USAGE":{"input_tokens":1,"output_tokens":1},"ev":{"t":"text","text":"hi"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fullCheck([]byte(tt.raw))
			if (err == nil) != tt.ok {
				t.Errorf("full check: %v, want ok %v", err, tt.ok)
			}
			if _, ok := QuickCheck([]byte(tt.raw)); ok && !tt.ok {
				t.Errorf("QuickCheck took it")
			}
		})
	}
}

func TestSealedKeyCaseRefused(t *testing.T) {
	sealed := `"sealed":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"`
	tests := []struct {
		name, raw string
		ok        bool
	}{
		{"plain", `{"id":"ca","time":1,"role":"agent","ev":{"t":"text"},` + sealed + `}`, true},
		{"second id in capitals", `{"id":"ca","Id":"cb","time":1,"role":"agent","ev":{"t":"text"},` + sealed + `}`, false},
		{"kind folded", `{"id":"ca","time":1,"role":"agent","ev":{"t":"text","T":"turn-end","status":"completed"},` + sealed + `}`, false},
		{"status folded", `{"id":"ca","time":1,"role":"agent","ev":{"t":"turn-end","status":"completed","STATUS":"cancelled"},` + sealed + `}`, false},
		{"sealed folded", `{"id":"ca","time":1,"role":"agent","ev":{"t":"text"},` + sealed + `,"Sealed":"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !IsSealed([]byte(tt.raw)) {
				t.Fatal("not sealed")
			}
			_, err := DecodeSealed([]byte(tt.raw))
			if (err == nil) != tt.ok {
				t.Errorf("DecodeSealed: %v, want ok %v", err, tt.ok)
			}
		})
	}
	var s SealedEnvelope
	if err := json.Unmarshal([]byte(`{"ID":"x"}`), &s); err != nil || s.ID != "x" {
		t.Fatalf("encoding/json no longer folds keys (%v, %q): this check may go", err, s.ID)
	}
}

// An envelope the full check takes reads the same to a reader that takes
// keys exactly and the last of duplicates, as the app's JSON.parse does:
// the same id, time, role, turn, subagent and event.
func FuzzEnvelopeReadsAsTheAppReads(f *testing.F) {
	for _, raw := range goldenEnvelopes(f) {
		if len(raw) < 1000 {
			f.Add(raw)
		}
	}
	f.Add([]byte(`{"id":"ca","ID":"cb","time":1,"role":"user","ev":{"t":"text","text":"hi"}}`))
	f.Add([]byte(`{"id":"ca","time":1,"role":"user","ev":{"t":"x"},"Ev":{"t":"text","text":"hi"}}`))
	f.Add([]byte(`{"id":"ca","id":"cb","time":1,"time":2,"role":"user","ev":{"t":"text","text":"a","text":"b"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e Envelope
		if json.Unmarshal(raw, &e) != nil || e.Validate() != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%q: taken, but not an object: %v", raw, err)
		}
		str := func(k string) string {
			var s string
			if v, ok := m[k]; ok && json.Unmarshal(v, &s) != nil {
				t.Fatalf("%q: %s is not a string to an exact reader", raw, k)
			}
			return s
		}
		var tm float64
		if json.Unmarshal(m["time"], &tm) != nil || int64(tm) != e.Time {
			t.Fatalf("%q: time %d, an exact reader reads %s", raw, e.Time, m["time"])
		}
		var ev Event
		if err := ev.UnmarshalJSON(m["ev"]); err != nil {
			t.Fatalf("%q: the ev an exact reader reads does not decode: %v", raw, err)
		}
		a, _ := json.Marshal(e.Ev)
		b, _ := json.Marshal(ev)
		if str("id") != e.ID || str("role") != string(e.Role) || str("turn") != e.Turn || str("subagent") != e.Subagent || string(a) != string(b) {
			t.Fatalf("%q: checked as %+v, an exact reader reads %q %q %q %q %s", raw, e, str("id"), str("role"), str("turn"), str("subagent"), b)
		}
	})
}
