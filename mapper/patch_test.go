package mapper

import (
	"bytes"
	"encoding/json"
	"testing"
)

// A structuredPatch read by the scan is what json.Unmarshal gives, and
// what the scan leaves to it is decoded by it.
func FuzzDecodePatch(f *testing.F) {
	for _, s := range []string{
		`[{"oldStart":1,"oldLines":2,"newStart":1,"newLines":3,"lines":[" a","-b","+c","+d"]}]`,
		`[]`, `null`, `[null]`, `[{"OLDSTART":5,"lines":null}]`, `[{"oldStart":1.5}]`, `[{"oldStart":"1"}]`,
		`[{"lines":["a"],"lines":[null]}]`, `[{"lineſ":["a"]}]`, `[{"oldStart":1e3}]`, `[{"lines":["\u00e9\ud800"]}]`, `[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := decodePatch(raw)
		var want []hunkJSON
		wantOK := json.Unmarshal(raw, &want) == nil
		if ok != wantOK {
			t.Fatalf("decodePatch(%q) ok %v, json.Unmarshal %v", raw, ok, wantOK)
		}
		if !ok {
			return
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("decodePatch(%q) = %s, json.Unmarshal gives %s", raw, g, w)
		}
	})
}

// What a Task result says of its subagent, read by the scan, is what
// json.Unmarshal gives (its error ignored, as the mapper ignores it).
func FuzzDecodeLaunch(f *testing.F) {
	for _, s := range []string{
		`{"isAsync":true,"status":"async_launched","agentId":"a1"}`, `{"ISASYNC":true,"Status":5,"agentid":"x"}`,
		`{"isAsync":"yes","agentId":"b","agentId":null}`, `{"ſtatus":"async_launched"}`, `{"isAsync":true,`, `[]`, `{}`,
		`{"content":[{"type":"text","text":"done"}],"totalTokens":5,"agentId":"c\u0041"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want launch
		if len(raw) > 0 && raw[0] == '{' {
			_ = json.Unmarshal(raw, &want)
		}
		if got := decodeLaunch(raw); got != want {
			t.Fatalf("decodeLaunch(%q) = %+v, json.Unmarshal gives %+v", raw, got, want)
		}
	})
}
