package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

const otherSession = "/claude-code-2.1.330/say-hi/transcripts/-home-dev-project/d83aa5ad-de94-4b51-a9ae-d6e89d27d795.jsonl"

// "Delete session" in the app asks first, then deletes the session on the
// relay: the page goes back to the list, which no longer holds it, and its
// offline copy is dropped. A session deleted elsewhere (ccrelay sessions rm)
// while the app was away leaves its offline copy at the next sync.
func TestAppDeleteSession(t *testing.T) {
	r := startAppRelay(t)
	id1, _ := r.replay(t, corpus+smallSession)
	id2, _ := r.replay(t, corpus+otherSession)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	kept := func(id string) string {
		return fmt.Sprintf(`import('./js/offline.js').then((m) => m.savedSessions()).then((l) => l.some((s) => s.id === %q))`, id)
	}
	r.open(t, ctx, id1)
	waitAsync(t, ctx, "the first session kept offline", kept(id1))
	r.open(t, ctx, id2)
	waitAsync(t, ctx, "the second session kept offline", kept(id2))

	// Declined: nothing happens.
	eval[bool](t, ctx, `(window.confirm = () => false, true)`)
	click(t, ctx, `button[aria-label="Session settings"]`)
	waitJS(t, ctx, "the Delete session button", `!!document.querySelector('dialog[open] button.danger')`)
	click(t, ctx, `button.danger`)
	if ls := run(t, "sessions", "ls", "--relay", r.base, "--relay-token", r.token); !strings.Contains(ls.stdout, id2) {
		t.Fatalf("deleted without confirmation:\n%s", ls.stdout)
	}
	// Confirmed: deleted.
	eval[bool](t, ctx, `(window.confirm = () => true, true)`)
	click(t, ctx, `button.danger`)
	waitJS(t, ctx, "back on the list without the session", fmt.Sprintf(`location.hash === '#/' && !!document.querySelector('li[data-session=%q]') && !document.querySelector('li[data-session=%q]')`, id1, id2))
	waitAsync(t, ctx, "the offline copy dropped", ""+kept(id2)+".then((k) => !k)")
	if ls := run(t, "sessions", "ls", "--relay", r.base, "--relay-token", r.token); strings.Contains(ls.stdout, id2) || !strings.Contains(ls.stdout, id1) {
		t.Fatalf("relay after delete:\n%s", ls.stdout)
	}

	// Deleted while the app is away: gone from its offline copies at the
	// next sync.
	must(t, ctx, chromedp.Navigate("about:blank"))
	if rm := run(t, "sessions", "rm", id1, "--relay", r.base, "--relay-token", r.token); rm.code != 0 {
		t.Fatalf("sessions rm: %d %s", rm.code, rm.stderr)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	waitAsync(t, ctx, "the offline copy dropped at the next sync", "import('./js/offline.js').then((m) => m.savedSessions()).then((l) => l.length === 0)")
}
