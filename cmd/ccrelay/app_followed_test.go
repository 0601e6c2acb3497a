package main

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/claude"
)

// A session announced as followed (plain claude, ccrelay follow install)
// is read-only in the app: its composer takes nothing, its status says so,
// and a one-line hint says that steering it needs ccrelay. A local
// session's composer is not.
func TestAppFollowedIsReadOnly(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	followed, local := claude.NewSessionID(), claude.NewSessionID()
	cli.announce(followed, map[string]any{"cwd": "/home/dev/greet", "machine": "laptop", "mode": "followed", "status": "idle"})
	cli.announce(local, map[string]any{"cwd": "/home/dev/other", "machine": "laptop", "mode": "local", "status": "idle"})
	cli.envelopes(followed, turn("f1", "Add a --shout flag", "Done.")...)
	cli.envelopes(local, turn("l1", "Run the tests", "All pass.")...)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "both sessions", `document.querySelectorAll('li.session-row').length === 2`)
	must(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/s/%s'`, followed)))
	waitJS(t, ctx, "the followed session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, followed))
	waitJS(t, ctx, "read-only with the hint", fmt.Sprintf(`(() => {
		const i = document.querySelector('textarea[aria-label=Prompt]'), s = document.querySelector('button.send');
		const hint = document.querySelector('.composer-hint')?.textContent || '';
		return i.disabled && s.disabled && hint.includes('needs ccrelay') && hint.includes(%q) &&
			document.querySelector('.top-sub .status-text')?.textContent === 'Followed (read-only)';
	})()`, followed))
	screenshot(t, ctx, "followed")
	checkAccessible(t, ctx, "a followed session's page")
	must(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/s/%s'`, local)))
	waitJS(t, ctx, "the local session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, local))
	if eval[bool](t, ctx, `document.querySelector('textarea[aria-label=Prompt]').disabled || (document.querySelector('.composer-hint')?.textContent || '').includes('needs ccrelay')`) {
		t.Error("a local session is read-only")
	}
}
