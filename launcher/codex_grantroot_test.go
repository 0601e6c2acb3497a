package launcher

import (
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
)

// A file change request that also asks to write anywhere under a folder
// for the rest of the session (grantRoot) says so where the app shows the
// request and its "for this session" answer, which grants it; one without
// asks only for its files.
func TestCodexRemoteGrantRootShown(t *testing.T) {
	change := fakeStep{Notify: codex.NotifyItemStarted, Params: params(map[string]any{"threadId": fakeThreadID, "turnId": fakeTurn,
		"item": map[string]any{"type": "fileChange", "id": "call_0013", "status": "inProgress",
			"changes": []map[string]any{{"path": "/p/hello.txt", "kind": map[string]any{"type": "add"}, "diff": "+hello\n"}}}})}
	for _, tc := range []struct {
		name  string
		grant any
		want  string
	}{
		{"grantRoot", "/home/dev", "/home/dev"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeCodex(t, fakeScript{Steps: []fakeStep{change, {Request: codex.RequestFileChangeApproval, Params: params(map[string]any{
				"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0013", "startedAtMs": 1, "reason": "write hello", "grantRoot": tc.grant})}}})
			f.prompt(t, "go")
			var pr PermissionRequest
			f.rec.waitFor(t, "the request shown", func() bool {
				st := f.rec.last()
				if len(st.Permissions) == 1 {
					pr = st.Permissions[0]
					return true
				}
				return false
			})
			rules := strings.Join(pr.ForSession, "|")
			if tc.want == "" {
				if strings.Contains(pr.Description, "under") || rules != "/p/hello.txt" {
					t.Errorf("shown %q, for the session %q", pr.Description, rules)
				}
				return
			}
			if !strings.Contains(pr.Description, tc.want) || !strings.Contains(string(pr.Input), tc.want) {
				t.Errorf("the request does not say it asks for writes under %s: %q %s", tc.want, pr.Description, pr.Input)
			}
			if !strings.Contains(rules, "writes under "+tc.want) {
				t.Errorf("allow for this session grants writes under %s, but says %q", tc.want, rules)
			}
		})
	}
}

// The same for an older server's applyPatchApproval.
func TestCodexRemoteLegacyGrantRootShown(t *testing.T) {
	f := startFakeCodex(t, fakeScript{Steps: []fakeStep{{Request: codex.RequestLegacyPatch, Params: params(map[string]any{
		"callId": "c2", "conversationId": fakeThreadID, "grantRoot": "/home/dev",
		"fileChanges": map[string]any{"a.txt": map[string]any{"type": "add", "content": "x"}}})}}})
	f.prompt(t, "go")
	var pr PermissionRequest
	f.rec.waitFor(t, "the request shown", func() bool {
		st := f.rec.last()
		if len(st.Permissions) == 1 {
			pr = st.Permissions[0]
			return true
		}
		return false
	})
	if !strings.Contains(pr.Description, "/home/dev") || !strings.Contains(string(pr.Input), "/home/dev") || len(pr.ForSession) == 0 || pr.ForSession[0] != "writes under /home/dev" {
		t.Errorf("the request does not say it asks for writes under /home/dev: %q %s %q", pr.Description, pr.Input, pr.ForSession)
	}
}
