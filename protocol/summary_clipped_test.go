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

// TestSummaryPermissionReasonRead: a request's mark that a denial's reason
// reaches the agent passes to the summary (the app's deny box says
// whether the agent reads the reason or it becomes a note); no mark, or a
// false one, gives none.
func TestSummaryPermissionReasonRead(t *testing.T) {
	for _, tc := range []struct {
		perm map[string]any
		want bool
	}{
		{map[string]any{"id": "a", "tool": "Bash", "reasonRead": true, "input": map[string]any{"command": "ls"}}, true},
		{map[string]any{"id": "a", "tool": "Bash", "reasonRead": false, "input": map[string]any{"command": "ls"}}, false},
		{map[string]any{"id": "a", "tool": "Bash", "input": map[string]any{"command": "ls"}}, false},
	} {
		raw, _ := json.Marshal(map[string]any{"mode": "remote", "agent": "codex", "permissions": []any{tc.perm}})
		var got struct {
			Permissions []map[string]json.RawMessage `json:"permissions"`
		}
		if err := json.Unmarshal(SummarizeInfo(raw), &got); err != nil || len(got.Permissions) != 1 {
			t.Fatalf("summary %s: %v", SummarizeInfo(raw), err)
		}
		if rr, ok := got.Permissions[0]["reasonRead"]; ok != tc.want || (ok && string(rr) != "true") {
			t.Errorf("%v: summary's request %v, want reasonRead %v", tc.perm, got.Permissions[0], tc.want)
		}
	}
}
