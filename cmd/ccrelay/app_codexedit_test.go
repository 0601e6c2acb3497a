package main

import (
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// A Codex session's request offers no edit of its input: Codex runs the
// command it asked for, whatever an allow sends. Allow answers with no
// input. (A Claude Code session's request keeps its edit:
// TestAppPermissionClipped.)
func TestAppCodexPermissionNoEdit(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "agent": protocol.AgentCodex, "permissions": []map[string]any{
		{"id": "req-cmd", "tool": "Bash", "input": map[string]any{"command": "rm -rf build", "cwd": "/p", "description": ""}}}})
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the request", `document.querySelectorAll('.perm').length === 1`)
	if eval[bool](t, ctx, `!!document.querySelector('.perm button.edit-first') || !!document.querySelector('.perm .perm-edit')`) {
		t.Fatal("a Codex request offers an edit of its input")
	}
	click(t, ctx, `.perm[data-request="req-cmd"] button.allow`)
	if c := cli.command(protocol.StatusDone, ""); c.RequestID != "req-cmd" || !c.Allow || len(c.Input) != 0 {
		t.Fatalf("answer %+v (input %s)", c, c.Input)
	}
}
