package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// schemaFieldNames lists every property name in a JSON schema document,
// at any depth.
func schemaFieldNames(v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if props, ok := x["properties"].(map[string]any); ok {
			for name := range props {
				out[name] = true
			}
		}
		for _, c := range x {
			schemaFieldNames(c, out)
		}
	case []any:
		for _, c := range x {
			schemaFieldNames(c, out)
		}
	}
}

// A denial's reason reaches the model only through the legacy approvals
// (execCommandApproval, applyPatchApproval: {"denied": {"rejection"}}):
// the answers to app-server's v2 approvals have no field for one in the
// tested version's schema (checked against the installed Codex by
// TestRealCodexSchema), so ccrelay shows it to the app in a note instead
// (docs/compatibility.md). A version that adds one fails here.
func TestApprovalReasonFields(t *testing.T) {
	dir := filepath.Join("testdata", TestedVersion, "schema")
	for _, tc := range []struct {
		file   string
		reason bool // a field for the reason is there
	}{
		{"ExecCommandApprovalResponse.json", true},
		{"ApplyPatchApprovalResponse.json", true},
		{"CommandExecutionRequestApprovalResponse.json", false},
		{"FileChangeRequestApprovalResponse.json", false},
		{"PermissionsRequestApprovalResponse.json", false},
	} {
		b, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		schemaFieldNames(doc, names)
		var found []string
		for n := range names {
			l := strings.ToLower(n)
			if strings.Contains(l, "reason") || strings.Contains(l, "rejection") || strings.Contains(l, "message") || strings.Contains(l, "feedback") {
				found = append(found, n)
			}
		}
		if (len(found) > 0) != tc.reason {
			t.Errorf("%s: fields for a reason %v, want some: %v", tc.file, found, tc.reason)
		}
	}
}
