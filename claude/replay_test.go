package claude

import "testing"

// A prompt's echo is told by its top-level isReplay, never by text that
// merely contains the words.
func TestParseStreamIsReplay(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`{"type":"user","isReplay":true,"message":{"role":"user","content":"hi"},"uuid":"u1"}`, true},
		{`{"type":"user","isReplay": true,"message":{"role":"user","content":"hi"},"uuid":"u1"}`, true},
		{`{"type":"user","isReplay":false,"message":{"role":"user","content":"hi"},"uuid":"u1"}`, false},
		{`{"type":"user","message":{"role":"user","content":"say \"isReplay\":true"},"uuid":"u1"}`, false},
		{`{"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1"}`, false},
		{`{"type":"assistant","isReplay":true,"message":{"role":"assistant","content":[{"type":"text","text":"x"}]},"uuid":"a1"}`, false},
	} {
		m, err := ParseStream([]byte(tc.line))
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if m.IsReplay != tc.want {
			t.Errorf("%s: IsReplay %v, want %v", tc.line, m.IsReplay, tc.want)
		}
	}
}
