package claude

import "testing"

// A tool result's text read by the scan is the text the full decode gives.
func FuzzToolResultText(f *testing.F) {
	for _, s := range []string{
		`[{"type":"text","text":"a\nb"},{"type":"image","source":{"type":"base64","data":"AA=="}}]`,
		`[null,{"TYPE":"x"},{"Text":"y","text":null}]`, `[{"type":5}]`, `[{"text":"a","text":"b"}]`, `["x"]`,
		`[{"type":"t\u0065xt","t\u0065xt":"\ud83d\ude00"}]`, `[{"tyſe":"x"}]`, `[{"type":"text","text":"a"]`, `"s\u00e9"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 || raw[0] != '[' {
			return
		}
		if got, want := ToolResultText(raw), blocksTextDecoded(raw); got != want {
			t.Fatalf("ToolResultText(%q) = %q, the full decode gives %q", raw, got, want)
		}
	})
}
