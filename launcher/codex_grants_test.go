package launcher

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
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
		// A write named after many reads, and after a deny: said first.
		{"a write after many reads", []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0009", "command": "make", "cwd": "/p", "reason": long, "startedAtMs": 1,
			"additionalPermissions": map[string]any{"fileSystem": map[string]any{"entries": append(manyReads(12),
				map[string]any{"access": "write", "path": map[string]any{"type": "path", "path": "/home/dev/.ssh"}})}}})}},
			[]string{"write /home/dev/.ssh"}, "the extra permissions it asks for"},
		{"permissions request", []fakeStep{{Request: codex.RequestPermissions, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0010", "cwd": "/p", "reason": long, "startedAtMs": 1,
			"permissions": map[string]any{"fileSystem": map[string]any{"read": manyPaths(12), "write": []string{"/etc"}}, "network": map[string]any{"enabled": true}}})}},
			[]string{"write /etc", "network access"}, "these permissions"},
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
			// Lists, and a sealed session's summary, keep a description's
			// first 256 bytes: the grant must be among them.
			info, _ := json.Marshal(map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []PermissionRequest{pr}})
			var sum struct {
				Permissions []struct {
					Description string `json:"description"`
				} `json:"permissions"`
			}
			if err := json.Unmarshal(protocol.SummarizeInfo(info), &sum); err != nil || len(sum.Permissions) != 1 {
				t.Fatalf("summary: %v %+v", err, sum)
			}
			for _, w := range tc.want {
				if !strings.Contains(pr.Description, w) {
					t.Errorf("the description, cut to %d bytes, does not say that an accept grants %s: it starts %q", len(pr.Description), w, cutString(pr.Description, 200))
				}
				if !strings.Contains(sum.Permissions[0].Description, w) {
					t.Errorf("the description lists carry does not say that an accept grants %s: %q", w, sum.Permissions[0].Description)
				}
			}
		})
	}
}

// manyPaths is n harmless paths; manyReads the same as read entries.
func manyPaths(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("/p/docs/chapter-%02d/notes.md", i))
	}
	return out
}

func manyReads(n int) []any {
	var out []any
	for _, p := range manyPaths(n) {
		out = append(out, map[string]any{"access": "read", "path": map[string]any{"type": "path", "path": p}})
	}
	return out
}

// describePermissions says what a profile grants, the most far-reaching
// first, whatever order the profile names them in.
func TestDescribePermissions(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"fileSystem":{"read":["/a"],"write":["/b"]},"network":{"enabled":true}}`, "write /b; network access; read /a"},
		{`{"fileSystem":{"entries":[{"access":"deny","path":{"type":"path","path":"/s"}},{"access":"read","path":{"type":"glob_pattern","pattern":"**/*.md"}},{"access":"write","path":{"type":"special","value":{"kind":"root"}}}]}}`,
			"write the whole file system (/); read files matching **/*.md; deny /s"},
		{`{"network":{"enabled":false}}`, `{"network":{"enabled":false}}`},
		{`"not a profile"`, `"not a profile"`},
	} {
		if got := describePermissions(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
