package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"
)

// A permission request answered elsewhere never stays a notification that
// says Claude waits: the relay's answered push replaces it (same tag); a
// push for it that comes late (push services hold them for hours) shows
// nothing, whether the worker asks the relay or, the relay unreachable,
// remembers the answer; a request still waiting is notified as before.
func TestAppAnsweredNotificationReplaced(t *testing.T) {
	r := startAppRelay(t)
	id, envs := r.replay(t, corpus+smallSession)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	registration := watchWorker(t, ctx, r.base)
	r.open(t, ctx, id)
	waitJS(t, ctx, "the service worker controlling the page", `!!navigator.serviceWorker.controller`)
	shows := followShows(t, ctx, r.base)
	sw := workerContext(t, ctx, r.base)
	must(t, ctx, chromedp.Navigate(r.base+"/#/")) // the list: the session is not shown

	handled := func() int {
		t.Helper()
		n, err := chromedp.Run(sw, chromedp.Evaluate[int](`self.pushesHandled ?? -1`))
		if err != nil {
			t.Fatalf("the service worker: %v", err)
		}
		return n
	}
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
	// deliverHandled delivers a push and waits until the worker handled it.
	deliverHandled := func(kind string, seq int) {
		t.Helper()
		before := handled()
		deliver(kind, seq)
		for deadline := time.Now().Add(30 * time.Second); handled() <= before; {
			if time.Now().After(deadline) {
				t.Fatalf("the %s push (seq %d) not handled by the service worker (handled: %d)", kind, seq, handled())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// titles: the titles of the session's notifications shown now, by tag.
	titles := func() map[string]string {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) => Object.fromEntries(ns.map((n) => [n.tag, n.title])))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	const waiting = "Claude is waiting for you"
	noneWaits := func(when string) {
		t.Helper()
		for tag, title := range titles() {
			if title == waiting {
				t.Errorf("%s: notification %s says %q", when, tag, title)
			}
		}
	}

	// A request: notified.
	cli := dialCLI(t, r)
	seq := len(envs)
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "make"}, "description": "Build it"},
	}})
	tag := "perm:" + id + ":req-1"
	deliver("permission", seq)
	waitShown(t, "the permission notification", shows, tag, 1)
	if got := titles()[tag]; got != waiting {
		t.Fatalf("the request's notification says %q", got)
	}

	// Answered in the terminal: the relay's answered push replaces it.
	cli.announce(id, map[string]any{"mode": "remote", "status": "busy"})
	deliver("answered", seq)
	for deadline := time.Now().Add(30 * time.Second); titles()[tag] == waiting; {
		if time.Now().After(deadline) {
			t.Fatalf("after the answered push the notification still says %q", waiting)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := titles()[tag]; got != "Answered" {
		t.Errorf("the answered request's notification says %q, want Answered", got)
	}

	// The request's push again, late: nothing says Claude waits.
	deliverHandled("permission", seq)
	noneWaits("a late push, the relay asked")

	// The relay unreachable: a late push no newer than the answer shows
	// nothing; a newer one (a request the worker cannot know of) does.
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) => { ns.forEach((n) => n.close()); return true; })`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	deliverHandled("permission", seq)
	noneWaits("a late push, the relay unreachable")
	deliverHandled("permission", seq+5)
	if got := titles()["permission:"+id]; got != waiting {
		t.Errorf("a newer request's push with the relay unreachable shows %q, want %q (shown: %v)", got, waiting, titles())
	}
	if t.Failed() {
		t.Logf("notifications: %s", strings.TrimSpace(fmt.Sprint(titles())))
	}
}
