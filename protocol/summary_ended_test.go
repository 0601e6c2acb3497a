package protocol

import (
	"encoding/json"
	"testing"
)

// A session that cannot go on keeps saying so in the lists (ended), with
// the session that took its place when that is a session id; ended other
// than true, or continuedAs alone, is left out.
func TestSummaryEnded(t *testing.T) {
	const next = "019ac0de-0000-7000-8000-000000000002"
	for _, tc := range []struct {
		name string
		info map[string]any
		want string // the summary's ended and continuedAs
	}{
		{"ended, and where it goes on", map[string]any{"ended": true, "continuedAs": next}, `true ` + next},
		{"ended, nowhere known", map[string]any{"ended": true}, `true `},
		{"ended, continuedAs no session id", map[string]any{"ended": true, "continuedAs": "../x"}, `true `},
		{"not ended", map[string]any{"ended": false, "continuedAs": next}, `false `},
		{"ended not a bool", map[string]any{"ended": "yes"}, `false `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.info["mode"] = "remote"
			b, _ := json.Marshal(tc.info)
			var got struct {
				Ended       bool   `json:"ended"`
				ContinuedAs string `json:"continuedAs"`
			}
			s := SummarizeInfo(b)
			if err := json.Unmarshal(s, &got); err != nil {
				t.Fatal(err)
			}
			if g, _ := json.Marshal(got.Ended); string(g)+" "+got.ContinuedAs != tc.want {
				t.Errorf("summary %s, want ended and continuedAs %q", s, tc.want)
			}
		})
	}
}
