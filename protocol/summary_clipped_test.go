package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSummaryPermissionClipped: a request's clipped mark passes to the
// summary, and a request whose input the summary itself shrinks is marked
// clipped too (an app that edited that input would allow less than was
// asked); one shown whole is not.
func TestSummaryPermissionClipped(t *testing.T) {
	for _, tc := range []struct {
		name string
		perm map[string]any
		want bool
	}{
		{"small", map[string]any{"id": "a", "tool": "Bash", "input": map[string]any{"command": "ls"}}, false},
		{"clipped by the CLI", map[string]any{"id": "a", "tool": "Bash", "clipped": true, "input": map[string]any{"command": "ls"}}, true},
		{"shrunk by the summary", map[string]any{"id": "a", "tool": "Write",
			"input": map[string]any{"file_path": "a.txt", "content": strings.Repeat("x", 2*summaryInputBytes)}}, true},
		{"clipped false", map[string]any{"id": "a", "tool": "Bash", "clipped": false, "input": map[string]any{"command": "ls"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(map[string]any{"mode": "remote", "permissions": []any{tc.perm}})
			var got struct {
				Permissions []struct {
					ID      string          `json:"id"`
					Clipped bool            `json:"clipped"`
					Input   json.RawMessage `json:"input"`
				} `json:"permissions"`
			}
			if err := json.Unmarshal(SummarizeInfo(raw), &got); err != nil || len(got.Permissions) != 1 {
				t.Fatalf("summary %s: %v", SummarizeInfo(raw), err)
			}
			if p := got.Permissions[0]; p.ID != "a" || p.Clipped != tc.want || len(p.Input) == 0 {
				t.Fatalf("summary's request %+v (input %s), want clipped %v", p, p.Input, tc.want)
			}
		})
	}
}
