package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// appendRaw and usage decoding by scan give what encoding/json gives.
func FuzzScanAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		` { "a" : [ 1 , "x <b> & \u2028 \" \\" ] } `, "{\"s\":\"\u2028\u2029<>&\"}", `[1, 2.5e3, true, null]`,
		`{"input_tokens":1,"output_tokens":2,"service_tier":"standard","cache_creation":{"ephemeral_5m_input_tokens":0}}`,
		`{"input_tokens":1.0,"output_tokens":2,"input_tokens":3}`, `{"input_tokens":"1","output_tokens":2}`,
		`{"input_tokens":1e400,"output_tokens":2}`, `{"input_tokens":1,"output_tokens":-0,"context_window":null}`,
		`null`, `[]`, `{"a":}`, `{"input_tokens":1,"output_tokens":2,"x\u0041":1,"xA":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want bytes.Buffer
		if err := json.Compact(&want, raw); err == nil {
			var esc bytes.Buffer
			json.HTMLEscape(&esc, want.Bytes())
			got, err := appendRaw([]byte("x"), raw)
			if err != nil || !bytes.Equal(got, append([]byte("x"), esc.Bytes()...)) {
				t.Fatalf("appendRaw(%q) = %q, %v; want %q", raw, got, err, esc.Bytes())
			}
		}
		var u1, u2 Usage
		err1 := u1.UnmarshalJSON(raw)
		err2 := u2.unmarshalDecoded(raw)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("Usage.UnmarshalJSON(%q): %v; by a full decode: %v", raw, err1, err2)
		}
		if err1 == nil && !bytes.Equal(u1.appendJSON(nil), u2.appendJSON(nil)) {
			t.Fatalf("Usage.UnmarshalJSON(%q) = %s; by a full decode: %s", raw, u1.appendJSON(nil), u2.appendJSON(nil))
		}
	})
}

// unmarshalDecoded is Usage.UnmarshalJSON as it was before the scan: by
// json.Unmarshal alone, the reference the scan must agree with.
func (u *Usage) unmarshalDecoded(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	if m == nil {
		return invalid("usage is not an object")
	}
	*u = Usage{}
	num := func(key string) (*int64, error) {
		raw, ok := m[key]
		if !ok || isNull(raw) {
			return nil, nil
		}
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, invalid("usage %s is not a number", key)
		}
		v := int64(f)
		if float64(v) != f {
			return nil, invalid("usage %s is not an integer", key)
		}
		return &v, nil
	}
	for _, k := range []string{"input_tokens", "output_tokens"} {
		p, err := num(k)
		if err != nil {
			return err
		}
		if p == nil {
			return invalid("usage %s missing", k)
		}
		if k == "input_tokens" {
			u.InputTokens = *p
		} else {
			u.OutputTokens = *p
		}
	}
	var err error
	if u.CacheCreationInputTokens, err = num("cache_creation_input_tokens"); err != nil {
		return err
	}
	if u.CacheReadInputTokens, err = num("cache_read_input_tokens"); err != nil {
		return err
	}
	if u.ContextWindow, err = num("context_window"); err != nil {
		return err
	}
	if raw, ok := m["service_tier"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &u.ServiceTier); err != nil {
			return invalid("service_tier is not a string")
		}
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens",
		"cache_read_input_tokens", "context_window", "service_tier"} {
		delete(m, k)
	}
	if len(m) > 0 {
		u.Extra = m
	}
	return u.Validate()
}

// A usage is read by one scan that copies only the keys Usage has no
// field for: Claude's usage (four counts, the service tier and two
// objects) takes 11 allocations (12 with -race), where a map of every
// member and a copy of each took 22.
func TestUsageScanAllocs(t *testing.T) {
	raw := []byte(`{"input_tokens":3,"cache_creation_input_tokens":1561,"cache_read_input_tokens":14310,"cache_creation":{"ephemeral_5m_input_tokens":1561,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard","server_tool_use":{"web_search_requests":0}}`)
	var u Usage
	n := testing.AllocsPerRun(100, func() {
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
	})
	if u.InputTokens != 3 || *u.CacheReadInputTokens != 14310 || u.ServiceTier != "standard" || len(u.Extra) != 2 {
		t.Fatalf("%+v", u)
	}
	if n > 12 {
		t.Errorf("%.0f allocations, want at most 12", n)
	}
}
