package main

import (
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/protocol"
)

// A push of a Codex session is notified in Codex's name: its request
// waits for "Codex", its turn is Codex's (a Claude Code session's say
// Claude: TestAppAnsweredNotificationReplaced).
func TestAppCodexNotifications(t *testing.T) {
	r := startAppRelay(t)
	id, envs := r.replay(t, corpus+smallSession)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	registration := watchWorker(t, ctx, r.base)
	r.open(t, ctx, id)
	waitJS(t, ctx, "the service worker controlling the page", `!!navigator.serviceWorker.controller`)
	shows := followShows(t, ctx, r.base)
	must(t, ctx, chromedp.Navigate(r.base+"/#/")) // the list: the session is not shown
	deliver := func(kind string, seq int) {
		t.Helper()
		rid := registration()
		if rid == "" {
			t.Fatal("no service worker registration seen")
		}
		data := fmt.Sprintf(`{"session":%q,"kind":%q,"seq":%d}`, id, kind, seq)
		if _, err := chromedp.Call(ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: r.base, RegistrationID: rid, Data: data}); err != nil {
			t.Fatalf("deliver push: %v", err)
		}
	}
	titles := func() map[string]string {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) => Object.fromEntries(ns.map((n) => [n.tag, n.title])))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	cli := dialCLI(t, r)
	seq := len(envs)
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "agent": protocol.AgentCodex, "permissions": []map[string]any{
		{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "make"}, "description": "Build it"},
	}})
	tag := "perm:" + id + ":req-1"
	deliver("permission", seq)
	waitShown(t, "the permission notification", shows, tag, 1)
	if got := titles()[tag]; got != "Codex is waiting for you" {
		t.Errorf("the request's notification says %q", got)
	}
	cli.announce(id, map[string]any{"mode": "remote", "status": "idle", "agent": protocol.AgentCodex})
	deliver("turn", seq+1)
	waitShown(t, "the turn's notification", shows, "turn:"+id, 1)
	if got := titles()["turn:"+id]; got != "Codex finished" {
		t.Errorf("the turn's notification says %q", got)
	}
}
