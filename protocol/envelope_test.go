package protocol

import (
	"encoding/json"
	"testing"
)

// plainString decodes exactly what json.Unmarshal decodes, or declines.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"\u00e9"`, `"é"`, "\"\xff\"", `""`, `"`, `"a"b"`, "\"a\x01\"", `null`, `"x" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := plainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil || got != want {
			t.Fatalf("%q: plainString %q, json.Unmarshal %q %v", raw, got, want, err)
		}
	})
}
