package claude

import (
	"testing"
	"unicode/utf8"
)

// A tool result's text read by the scan is the text the full decode gives,
// and is valid UTF-8 whatever the bytes (the mapper cuts it without
// checking again).
func FuzzToolResultText(f *testing.F) {
	for _, s := range []string{
		`[{"type":"text","text":"a\nb"},{"type":"image","source":{"type":"base64","data":"AA=="}}]`,
		`[null,{"TYPE":"x"},{"Text":"y","text":null}]`, `[{"type":5}]`, `[{"text":"a","text":"b"}]`, `["x"]`,
		`[{"type":"t\u0065xt","t\u0065xt":"\ud83d\ude00"}]`, `[{"tyſe":"x"}]`, `[{"type":"text","text":"a"]`, `"s\u00e9"`,
		"\"a\xffb\xc3\"", `"\ud800x"`, "[{\"type\":\"a\xfe\",\"text\":\"\xe2\x82\"}]", "[{\"type\":\"text\",\"text\":\"\xed\xa0\x80\"}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := ToolResultText(raw)
		if !utf8.ValidString(got) {
			t.Fatalf("ToolResultText(%q) = %q, not valid UTF-8", raw, got)
		}
		if len(raw) == 0 || raw[0] != '[' {
			return
		}
		if want := blocksTextDecoded(raw); got != want {
			t.Fatalf("ToolResultText(%q) = %q, the full decode gives %q", raw, got, want)
		}
	})
}
