package main

import (
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// A request announced clipped (its input too long to show whole) says so
// and offers no edit of its input, only Allow, Deny and a reason; Allow
// answers with no input of the app's, so the CLI allows what was asked. A
// request whose input the list's summary cut, with no tool call of it in
// view, offers no edit either (it would send the cut input). A request
// shown whole keeps its edit.
func TestAppPermissionClipped(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-big", "tool": "Write", "clipped": true, "input": map[string]any{"file_path": "big.txt",
			"content": strings.Repeat("x", 8<<10) + "… [2088960 more bytes not shown]"}},
		{"id": "req-small", "tool": "Bash", "input": map[string]any{"command": "ls"}},
		{"id": "req-mid", "tool": "Write", "input": map[string]any{"file_path": "mid.txt", "content": strings.Repeat("y", 4<<10)}}}})
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the requests", `document.querySelectorAll('.perm').length === 3`)
	got := eval[string](t, ctx, `['req-big', 'req-small', 'req-mid'].map((id) => { const c = document.querySelector('.perm[data-request="' + id + '"]');
		return id + ':' + !!c.querySelector('button.edit-first') + ':' + !!c.querySelector('.perm-edit') + ':' + (c.querySelector('.perm-clipped')?.textContent || '') }).join('|')`)
	if want := "req-big:false:false:Too long to show whole: part of it is shown. Allow and Deny answer all of it.|req-small:true:true:|req-mid:false:false:"; got != want {
		t.Fatalf("cards %s, want %s", got, want)
	}
	screenshot(t, ctx, "permission-clipped-phone")
	click(t, ctx, `.perm[data-request="req-big"] button.allow`)
	if c := cli.command(protocol.StatusDone, ""); c.RequestID != "req-big" || !c.Allow || len(c.Input) != 0 {
		t.Fatalf("answer %+v (input %s)", c, c.Input)
	}
}
