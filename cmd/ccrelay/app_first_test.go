package main

// Browser tests of what the app says to someone who starts: its first
// screen with nothing to show, and a device the relay no longer takes.

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// firstSteps reads the list's first steps: which next step it gives and its
// text, and whether it fits a phone screen (nothing wider than the screen,
// its last line above the screen's bottom).
type firstSteps struct {
	Next, Text string
	Fits       bool
}

const readFirstSteps = `(() => {
	const el = document.querySelector('.first-steps');
	if (!el) return { next: '', text: '', fits: false };
	const r = el.getBoundingClientRect();
	return { next: el.dataset.next, text: el.innerText,
		fits: document.documentElement.scrollWidth <= innerWidth && r.right <= innerWidth && r.bottom <= innerHeight };
})()`

// With no session yet, the list says in two lines what ccrelay is and what
// to do next: a device that did not pair is told to run ccrelay pair on the
// computer; a paired one, to run ccrelay where it would run claude. Both fit
// a 390×844 phone screen and pass the accessibility check (screenshots left
// for people to look at).
func TestAppFirstScreenSaysWhatAndNext(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the first steps", `!!document.querySelector('.first-steps')`)
	got := eval[firstSteps](t, ctx, readFirstSteps)
	if got.Next != "pair" || !strings.Contains(got.Text, "Claude Code and Codex sessions") || !strings.Contains(got.Text, "ccrelay pair") || !got.Fits {
		t.Errorf("unpaired device's first steps: %+v", got)
	}
	screenshot(t, ctx, "first-steps-unpaired")
	checkAccessible(t, ctx, "the first steps of an unpaired device")

	pairBrowser(t, ctx, r)
	waitJS(t, ctx, "the first steps of a paired device", `document.querySelector('.first-steps')?.dataset.next === 'start'`)
	got = eval[firstSteps](t, ctx, readFirstSteps)
	if !strings.Contains(got.Text, "Claude Code and Codex sessions") || !strings.Contains(got.Text, "run ccrelay where you would run claude") || strings.Contains(got.Text, "ccrelay pair") || !got.Fits {
		t.Errorf("paired device's first steps: %+v", got)
	}
	screenshot(t, ctx, "first-steps-paired")
	checkAccessible(t, ctx, "the first steps of a paired device")
}

// A device with no credential opens on a page that says what ccrelay is
// before asking it to pair.
func TestAppTokenPageSaysWhat(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/"))
	waitJS(t, ctx, "the token page", `!!document.querySelector('.token-form')`)
	text := eval[string](t, ctx, `document.querySelector('.empty-page').innerText`)
	if !strings.Contains(text, "Claude Code and Codex sessions") || !strings.Contains(text, "run ccrelay pair") {
		t.Errorf("the token page says:\n%s", text)
	}
	checkAccessible(t, ctx, "the token page")
}

// A device the relay no longer takes is told to pair again (ccrelay pair on
// the computer), never to open the link of ccrelay serve, which opens the
// app only on the relay's own machine: a refused credential's banner, and
// the page of a device signed out because its credential was revoked.
func TestAppRefusedDeviceSaysPairAgain(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token=0123456789abcdef0123456789abcdef"))
	waitJS(t, ctx, "the refused banner", `document.querySelector('.conn-banner')?.dataset.state === 'refused'`)
	banner := eval[string](t, ctx, `document.querySelector('.conn-banner').innerText`)
	if !strings.Contains(banner, "Pair this device again") || !strings.Contains(banner, "ccrelay pair") || strings.Contains(banner, "ccrelay serve") {
		t.Errorf("the refused banner says: %s", banner)
	}
	must(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(r.base+"/#signed-out=revoked"))
	waitJS(t, ctx, "the signed-out page", `!!document.querySelector('.signed-out')`)
	page := eval[string](t, ctx, `document.querySelector('.empty-page').innerText`)
	if !strings.Contains(page, "pair it again") || !strings.Contains(page, "ccrelay pair") || strings.Contains(page, "ccrelay serve") {
		t.Errorf("the revoked device's page says:\n%s", page)
	}
	checkAccessible(t, ctx, "the revoked device's page")
}
