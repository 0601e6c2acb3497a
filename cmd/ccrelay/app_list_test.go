package main

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// The session list comes a page at a time: of ~200 sessions the app shows
// the newest 50, asks for the next page as the person scrolls near the
// end and shows each as it arrives, every session once; a new session
// comes to the top while pages are loaded; a search finds a session on a
// page not loaded yet (the relay serves the search page by page); a
// session on no loaded page, opened by its link, shows its title.
func TestAppPagesSessionList(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	const sessions = 203
	id := func(i int) string { return fmt.Sprintf("5e55a003-0000-4000-8000-%012d", i) }
	for i := range sessions {
		cli.announce(id(i), map[string]any{"title": fmt.Sprintf("paged task %03d", i), "cwd": fmt.Sprintf("/w/project-%d", i%7), "machine": "laptop", "mode": "remote", "status": "idle"})
	}
	ctx := newBrowser(t)
	must(t, ctx, phone(), chromedp.Navigate(r.base+"/#token="+r.token))
	const rows = `document.querySelectorAll('.sessions li.session-row').length`
	waitJS(t, ctx, "the first page", rows+` === 50 && !!document.querySelector('.sessions li.more')`)
	// Scrolled to the end, page after page arrives.
	seen := []int{50}
	for n := 50; n < sessions; {
		eval[bool](t, ctx, `(window.scrollTo(0, document.documentElement.scrollHeight), true)`)
		waitJS(t, ctx, "the next page", fmt.Sprintf("%s > %d", rows, n))
		n = eval[int](t, ctx, rows)
		seen = append(seen, n)
		if len(seen) > 10 {
			t.Fatalf("rows after each scroll: %v", seen)
		}
	}
	t.Logf("rows after each scroll: %v", seen)
	if seen[len(seen)-1] != sessions || seen[1] != 100 {
		t.Fatalf("rows after each scroll: %v, want pages of 50 up to %d", seen, sessions)
	}
	waitJS(t, ctx, "the end of the list", `!document.querySelector('.sessions li.more')`)
	ids := eval[[]string](t, ctx, `[...document.querySelectorAll('.sessions li.session-row')].map((e) => e.dataset.session)`)
	once := map[string]bool{}
	for _, s := range ids {
		if once[s] {
			t.Fatalf("session %s listed twice", s)
		}
		once[s] = true
	}
	// A new session, and an old one that changes: both to the top.
	fresh := "5e55a003-0000-4000-8000-999999999999"
	cli.announce(fresh, map[string]any{"title": "a fresh one", "mode": "remote", "status": "busy"})
	waitJS(t, ctx, "the new session on top", fmt.Sprintf(`document.querySelector('.sessions li.session-row').dataset.session === %q`, fresh))
	cli.announce(id(3), map[string]any{"title": "paged task 003 again", "mode": "remote", "status": "busy"})
	waitJS(t, ctx, "the changed session on top", fmt.Sprintf(`document.querySelector('.sessions li.session-row').dataset.session === %q`, id(3)))
	if n := eval[int](t, ctx, rows); n != sessions+1 {
		t.Fatalf("%d rows after a new session, want %d", n, sessions+1)
	}
	// A fresh page: only the first page is loaded; a search finds an old
	// session the app has not loaded.
	must(t, ctx, chromedp.Reload())
	waitJS(t, ctx, "the first page again", rows+` === 50`)
	must(t, ctx, chromedp.SendKeys(`input.list-search`, "task 011"))
	waitJS(t, ctx, "the old session found", fmt.Sprintf(`(() => { const r = [...document.querySelectorAll('.sessions li.session-row')]; return r.length === 1 && r[0].dataset.session === %q })()`, id(11)))
	waitJS(t, ctx, "the search's pages done", `!document.querySelector('.sessions li.more')`)
	checkAccessible(t, ctx, "a searched list")
	// A session on no page loaded, opened by its link: the app asks for
	// its summary and shows its title.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"), chromedp.Reload())
	waitJS(t, ctx, "the first page once more", rows+` === 50`)
	eval[bool](t, ctx, fmt.Sprintf(`(location.hash = '#/s/' + %q, true)`, id(5)))
	waitJS(t, ctx, "the linked session's title", `document.querySelector('.top-title')?.textContent === 'paged task 005'`)
}
