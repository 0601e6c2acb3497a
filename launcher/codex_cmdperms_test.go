package launcher

import (
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
)

// A command request that also asks for more permissions (write access,
// the network) or for a host of the managed network says so where the app
// shows it: an allow grants them with the command.
func TestCodexRemoteCommandExtrasShown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  []string
	}{
		{"additional permissions", map[string]any{"additionalPermissions": map[string]any{"fileSystem": map[string]any{"write": []string{"/home/dev/.ssh"}}, "network": map[string]any{"enabled": true}}},
			[]string{"/home/dev/.ssh", "network"}},
		{"network host", map[string]any{"networkApprovalContext": map[string]any{"host": "example.org", "protocol": "https"}}, []string{"example.org"}},
		{"none", map[string]any{"additionalPermissions": nil}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := map[string]any{"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0007", "command": "make deploy", "cwd": "/p", "reason": "deploy", "startedAtMs": 1}
			for k, v := range tc.extra {
				p[k] = v
			}
			f := startFakeCodex(t, fakeScript{Steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(p)}}})
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
			if tc.want == nil {
				if pr.Description != "deploy" || strings.Contains(string(pr.Input), "additional") {
					t.Errorf("shown %q %s", pr.Description, pr.Input)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(pr.Description, w) || !strings.Contains(string(pr.Input), w) {
					t.Errorf("the request does not say it also asks for %s: %q %s", w, pr.Description, pr.Input)
				}
			}
		})
	}
}
