package launcher

import (
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
)

// What an accept grants beside the request itself (more permissions, a
// network host, writes under a folder) is said first in the request's
// description: the model's reason, which it writes as long as it likes,
// comes after it, and the description is cut to MaxShownString, so that a
// reason longer than that cannot push the grant out of what the app
// shows. The app shows a request's call as the session mapped it, whose
// arguments do not hold the grant: the description is where it is seen.
// "For this session", which puts the grant in Codex's session-wide
// approval cache too, names it first among its rules.
func TestCodexRemoteGrantsShownPastLongReason(t *testing.T) {
	long := "please " + strings.Repeat("run this to fix the build ", MaxShownString/20)
	change := fakeStep{Notify: codex.NotifyItemStarted, Params: params(map[string]any{"threadId": fakeThreadID, "turnId": fakeTurn,
		"item": map[string]any{"type": "fileChange", "id": "call_0013", "status": "inProgress",
			"changes": []map[string]any{{"path": "/p/hello.txt", "kind": map[string]any{"type": "add"}, "diff": "+hello\n"}}}})}
	for _, tc := range []struct {
		name  string
		steps []fakeStep
		want  []string
		rule  string // what "for this session" says first
	}{
		{"additional permissions", []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0007", "command": "make", "cwd": "/p", "reason": long, "startedAtMs": 1,
			"additionalPermissions": map[string]any{"fileSystem": map[string]any{"write": []string{"/home/dev/.ssh"}}}})}},
			[]string{"/home/dev/.ssh"}, "the extra permissions it asks for"},
		{"network host", []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0008", "command": "make", "cwd": "/p", "reason": long, "startedAtMs": 1,
			"networkApprovalContext": map[string]any{"host": "exfil.example.org", "protocol": "https"}})}},
			[]string{"exfil.example.org"}, "network access to exfil.example.org"},
		{"grantRoot", []fakeStep{change, {Request: codex.RequestFileChangeApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0013", "startedAtMs": 1, "reason": long, "grantRoot": "/home/dev"})}},
			[]string{"/home/dev"}, "writes under /home/dev"},
		{"legacy grantRoot", []fakeStep{{Request: codex.RequestLegacyPatch, Params: params(map[string]any{
			"callId": "c2", "conversationId": fakeThreadID, "grantRoot": "/home/dev", "reason": long,
			"fileChanges": map[string]any{"a.txt": map[string]any{"type": "add", "content": "x"}}})}},
			[]string{"/home/dev"}, "writes under /home/dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeCodex(t, fakeScript{Steps: tc.steps})
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
			if len(pr.Description) > MaxShownString+64 {
				t.Errorf("description of %d bytes, over MaxShownString", len(pr.Description))
			}
			if len(pr.ForSession) == 0 || pr.ForSession[0] != tc.rule {
				t.Errorf("'for this session' grants %q too, but says %q", tc.rule, pr.ForSession)
			}
			for _, w := range tc.want {
				if !strings.Contains(pr.Description, w) {
					t.Errorf("the description, cut to %d bytes, does not say that an accept grants %s: it starts %q", len(pr.Description), w, cutString(pr.Description, 200))
				}
			}
		})
	}
}
