package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSummaryPermissionClipped: a request's clipped mark passes to the
// summary, and a request whose input the summary itself shrinks is marked
// inputCut (an app that edited that input would allow less than was
// asked); one shown whole is neither.
func TestSummaryPermissionClipped(t *testing.T) {
	for _, tc := range []struct {
		name          string
		perm          map[string]any
		want, wantCut bool
	}{
		{"small", map[string]any{"id": "a", "tool": "Bash", "input": map[string]any{"command": "ls"}}, false, false},
		{"clipped by the CLI", map[string]any{"id": "a", "tool": "Bash", "clipped": true, "input": map[string]any{"command": "ls"}}, true, false},
		{"shrunk by the summary", map[string]any{"id": "a", "tool": "Write",
			"input": map[string]any{"file_path": "a.txt", "content": strings.Repeat("x", 2*summaryInputBytes)}}, false, true},
		{"clipped false", map[string]any{"id": "a", "tool": "Bash", "clipped": false, "input": map[string]any{"command": "ls"}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(map[string]any{"mode": "remote", "permissions": []any{tc.perm}})
			var got struct {
				Permissions []struct {
					ID      string          `json:"id"`
					Clipped bool            `json:"clipped"`
					Cut     bool            `json:"inputCut"`
					Input   json.RawMessage `json:"input"`
				} `json:"permissions"`
			}
			if err := json.Unmarshal(SummarizeInfo(raw), &got); err != nil || len(got.Permissions) != 1 {
				t.Fatalf("summary %s: %v", SummarizeInfo(raw), err)
			}
			if p := got.Permissions[0]; p.ID != "a" || p.Clipped != tc.want || p.Cut != tc.wantCut || len(p.Input) == 0 {
				t.Fatalf("summary's request %+v (input %s), want clipped %v, inputCut %v", p, p.Input, tc.want, tc.wantCut)
			}
		})
	}
}
