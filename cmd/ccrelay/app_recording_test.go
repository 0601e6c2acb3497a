package main

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/claude"
)

// A session announced as a recording ("recording": true, as ccrelay demo
// announces it) is marked as one in the list and on its page, which says
// nothing runs it; a session announced without the flag is not.
func TestAppShowsRecording(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	rec, live := claude.NewSessionID(), claude.NewSessionID()
	cli.announce(rec, map[string]any{"cwd": "/home/dev/greet", "machine": "laptop", "status": "idle", "recording": true})
	cli.announce(live, map[string]any{"cwd": "/home/dev/other", "machine": "laptop", "mode": "local", "status": "idle"})
	cli.envelopes(rec, turn("r1", "Add a --shout flag", "Done.")...)
	cli.envelopes(live, turn("l1", "Run the tests", "All pass.")...)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "both sessions", `document.querySelectorAll('li.session-row').length === 2`)
	chip := func(id string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector('li[data-session=%q] .chip.recording')?.textContent || ''`, id))
	}
	if c := chip(rec); c != "Recording" {
		t.Errorf("the recording's row says %q, want Recording", c)
	}
	if c := chip(live); c != "" {
		t.Errorf("a live session's row says %q", c)
	}
	click(t, ctx, fmt.Sprintf(`li[data-session=%q] a`, rec))
	waitJS(t, ctx, "the recording rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, rec))
	waitJS(t, ctx, "the recording said", `(() => { const n = document.querySelector('.recording-note'); return !!n && !n.hidden && n.innerText.includes('recording') && document.querySelector('.top-sub .status-text')?.textContent === 'Recording'; })()`)
	screenshot(t, ctx, "recording")
	checkAccessible(t, ctx, "a recording's page")
	must(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/s/%s'`, live)))
	waitJS(t, ctx, "the live session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, live))
	if eval[bool](t, ctx, `(() => { const n = document.querySelector('.recording-note'); return document.querySelector('.top-sub .status-text')?.textContent === 'Recording' || (!!n && !n.hidden); })()`) {
		t.Error("a live session is said to be a recording")
	}
}
