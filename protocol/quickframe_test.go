package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// batchAgrees says what is wrong, if anything, with QuickBatch of data:
// it must take what QuickFrame takes, as QuickFrame gives it, and say of
// each envelope what QuickCheck says.
func batchAgrees(data []byte) string {
	f, ids, ok := QuickBatch(data)
	want, wantOK := QuickFrame(data)
	if ok != wantOK || !reflect.DeepEqual(f, want) {
		return fmt.Sprintf("QuickBatch = %+v, %v; QuickFrame = %+v, %v", f, ok, want, wantOK)
	}
	if !ok {
		return ""
	}
	if len(ids) != len(f.Envelopes) {
		return fmt.Sprintf("%d ids for %d envelopes", len(ids), len(f.Envelopes))
	}
	for i, raw := range f.Envelopes {
		if id, _ := QuickCheck(raw); ids[i] != id {
			return fmt.Sprintf("envelope %d: QuickBatch says %q, QuickCheck %q", i, ids[i], id)
		}
	}
	return ""
}

// QuickFrame gives what json.Unmarshal gives, for every frame it takes:
// frames made of the golden envelopes, and some of them changed a byte
// at a time; and it takes the frames a CLI sends. QuickBatch agrees with
// QuickFrame and QuickCheck on each.
func TestQuickFrame(t *testing.T) {
	gold := goldenEnvelopes(t)
	var frames [][]byte
	for i := 0; i+10 <= len(gold); i += 10 {
		envs := make([]json.RawMessage, 10)
		for k := range envs {
			envs[k] = gold[i+k]
		}
		b, _ := json.Marshal(Frame{V: 1, Type: FrameEnvelopes, Ref: "r1", Session: "5e55a001-0000-4000-8000-000000000001", Envelopes: envs})
		frames = append(frames, b)
	}
	frames = append(frames, []byte(` { "v" : 1 , "type" : "envelopes" , "envelopes" : [ ] } `), []byte(`{"v":1,"type":"list"}`),
		[]byte(`{"v":1,"type":"subscribe","session":"x","after":3}`), []byte(`{"v":1,"envelopes":null}`), []byte(`{"V":1}`),
		[]byte(`{"v":1,"v":2}`), []byte(`{"v":1.0}`), []byte(`{"v":1,"type":"a\u0062"}`), []byte(`{"v":1,"envelopes":[1]}`))
	took := 0
	check := func(data []byte) bool {
		if msg := batchAgrees(data); msg != "" {
			t.Fatalf("%s: %s", data, msg)
		}
		f, ok := QuickFrame(data)
		if !ok {
			return false
		}
		var want Frame
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("QuickFrame took %q; json.Unmarshal: %v", data, err)
		}
		if !reflect.DeepEqual(f, want) {
			t.Fatalf("QuickFrame of %q:\n%+v\nwant\n%+v", data, f, want)
		}
		return true
	}
	for n, data := range frames {
		if check(data) {
			took++
		}
		if n%100 != 0 {
			continue
		}
		for i := 0; i < len(data); i += 7 {
			for _, c := range []byte{'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '1', 'n'} {
				m := bytes.Clone(data)
				m[i] = c
				check(m)
			}
		}
	}
	if took < len(frames)-9 {
		t.Fatalf("QuickFrame took %d of %d batches", took, len(frames)-9)
	}
	for _, s := range []string{`{"v":1,"type":"list"}`, ` { "v" : 1 , "type" : "envelopes" , "envelopes" : [ ] } `} {
		if _, ok := QuickFrame([]byte(s)); !ok {
			t.Errorf("QuickFrame did not take %s", s)
		}
	}
}

func FuzzQuickFrame(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"envelopes","ref":"r","session":"s","envelopes":[{"id":"ca"},{}]}`))
	gold := goldenEnvelopes(f)
	for i := 0; i+3 <= len(gold); i += 300 {
		b, _ := json.Marshal(Frame{V: 1, Type: FrameEnvelopes, Session: "s", Envelopes: []json.RawMessage{gold[i], gold[i+1], gold[i+2]}})
		if len(b) < 4000 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if msg := batchAgrees(data); msg != "" {
			t.Fatalf("%q: %s", data, msg)
		}
		got, ok := QuickFrame(data)
		if !ok {
			return
		}
		var want Frame
		if err := json.Unmarshal(data, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("QuickFrame of %q: %+v; json.Unmarshal: %+v, %v", data, got, want, err)
		}
	})
}
