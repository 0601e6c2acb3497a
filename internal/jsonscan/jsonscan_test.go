package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var seeds = []string{
	`{}`, `[]`, `""`, `"a\"b\\c\/\b\f\n\r\t\u00e9\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\udc00\ud800"`,
	"\"\xff\xfe ok \xed\xa0\x80\"", `"\'"`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", `"abc`, `"abc\"`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e10`, `.5`, `+1`, `1 2`,
	`true`, `tru`, `false`, `null`, `nul`, ` {"a" : [1, {"b":null}] } `, `{"a":1,}`, `[1,]`, `[,1]`,
	`{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `[[[[]]]]`, `[1]]`, `{"t\u0079pe":"x","type":"y"}`,
	`{"type":"text","text":"hi"}`, strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("{\"a\":", 3) + "1}}}",
	"\t\r\n[ ]\n", `[{"type":"image","source":{"type":"base64","data":"AAA="}}]`,
	// A byte order mark, white space JSON does not have, trailing garbage.
	"\xef\xbb\xbf{}", "\ufeff\"a\"", "\v1", "\f1", "1\u00a0", "\u2028[]", "[] x", "{}}", `"a""b"`, "1\x00",
	// Escaped NUL, surrogate halves, duplicate keys, huge numbers.
	`"\u0000"`, `"a\u0000b"`, `"\ud800"`, `"\udfff\ud800\udc00"`, `"\ud800\u0041"`, `"\ud800\\"`,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":[2]}`, `{"A":1,"a":2}`, `[1e400, -1e-400, 123456789012345678901234567890]`,
	`[-01]`, `[1.e5]`, `[0x10]`, `[NaN]`, `[Infinity]`, `["\u00"]`,
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

func TestStringAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		checkString(t, []byte(s))
	}
}

func checkString(t *testing.T, v []byte) {
	t.Helper()
	if len(bytes.TrimSpace(v)) != len(v) {
		return // String takes a value without white space around it
	}
	got, ok := String(v)
	var want string
	err := json.Unmarshal(v, &want)
	wantOK := err == nil && len(v) > 0 && v[0] == '"' && v[len(v)-1] == '"'
	if ok != wantOK || got != want {
		t.Errorf("String(%.60q) = %q, %v; json.Unmarshal gives %q, %v", v, got, ok, want, err)
	}
}

func TestEachMember(t *testing.T) {
	var keys []string
	err := EachMember([]byte(` {"a" : [1, {"b":"}"}] , "t\u0079pe":"x", "e":{} } `), func(k, v []byte) error {
		keys = append(keys, string(k)+"="+string(v))
		return nil
	})
	want := `a=[1, {"b":"}"}] type="x" e={}`
	if err != nil || strings.Join(keys, " ") != want {
		t.Fatalf("got %q, %v; want %q", keys, err, want)
	}
	for _, bad := range []string{`{"a":1,}`, `{"a"}`, `{"a":1 "b":2}`, `[1]`, `{"a":[1}`, `{"a":"x}`} {
		if err := EachMember([]byte(bad), func(k, v []byte) error { return nil }); err == nil {
			t.Errorf("EachMember(%q) succeeded", bad)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, got, want)
		}
		checkString(t, b)
		// On a valid array, the walk gives the elements a decode gives.
		var elems []json.RawMessage
		if json.Unmarshal(b, &elems) == nil && elems != nil {
			var got []json.RawMessage
			if err := EachElem(b, func(v []byte) error {
				got = append(got, v)
				return nil
			}); err != nil {
				t.Fatalf("EachElem(%q): %v", b, err)
			}
			if len(got) != len(elems) {
				t.Fatalf("EachElem(%q): %d elements, decode has %d", b, len(got), len(elems))
			}
			for i := range elems {
				if !bytes.Equal(got[i], elems[i]) {
					t.Fatalf("EachElem(%q)[%d] = %s, decode has %s", b, i, got[i], elems[i])
				}
			}
		}
		// On a valid object, the walk gives the keys and values a decode
		// gives (the last of duplicate keys).
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil || m == nil {
			return
		}
		got := map[string]json.RawMessage{}
		if err := EachMember(b, func(k, v []byte) error {
			got[string(k)] = v
			return nil
		}); err != nil {
			t.Fatalf("EachMember(%q): %v", b, err)
		}
		if len(got) != len(m) {
			t.Fatalf("EachMember(%q): %d keys, decode has %d", b, len(got), len(m))
		}
		for k, v := range m {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("EachMember(%q)[%q] = %s, decode has %s", b, k, got[k], v)
			}
		}
	})
}
