package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// typeInto types text into the first visible element sel matches, as
// chromedp.SendKeys does, without its data race: SendKeys reads the node's
// attributes before it takes the node's lock, while the tab's event loop
// rewrites them whenever the page changes an attribute of that element (a
// textarea enabled, a class toggled), which the race detector reports
// (TestAppNewSessionSheet failed so once). The element is focused, then the
// keys go to it.
func typeInto(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(chromedp.CSS(sel), chromedp.NodeVisible),
		chromedp.KeyEvent(text),
	)
}

// typeInto types into an element while the page keeps changing its
// attributes: every key arrives, and the race detector (CI runs the tests
// with -race) reports nothing.
func TestTypeIntoWhileAttributesChange(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><title>typing</title><textarea aria-label="Prompt"></textarea>
<script>const e = document.querySelector('textarea'); setInterval(() => { e.toggleAttribute('data-busy'); e.classList.toggle('on'); }, 1);</script>`))
	}))
	t.Cleanup(srv.Close)
	ctx := newBrowser(t)
	must(t, ctx, chromedp.Navigate(srv.URL))
	const rounds = 40
	for i := 0; i < rounds; i++ {
		must(t, ctx, typeInto(`textarea[aria-label="Prompt"]`, "ab"))
	}
	if got, want := eval[string](t, ctx, `document.querySelector('textarea').value`), strings.Repeat("ab", rounds); got != want {
		t.Fatalf("typed %q, want %q", got, want)
	}
}
