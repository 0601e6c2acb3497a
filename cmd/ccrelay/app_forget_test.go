package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// keptSealedSession replays a corpus session sealed by the machine of
// state (which gives the paired browser its key), opens it in the browser
// of ctx and waits until the page saved it for offline reading; it checks
// that the device keeps it, its key and its credential, and returns the
// session's id.
func keptSealedSession(t *testing.T, ctx context.Context, r *appRelay, state string) string {
	t.Helper()
	_, id := replaySealed(t, r, state)
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id))
	waitJS(t, ctx, "the session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, id))
	waitAsync(t, ctx, "the session kept for offline reading", fmt.Sprintf(
		`import('./js/offline.js').then((m) => m.savedSessions()).then((l) => l.some((s) => s.id === %q && s.last > 20))`, id))
	if n := eval[int](t, ctx, `ccrelay.skipped.length`); n != 0 {
		t.Fatalf("the sealed session did not open: %v", eval[[]string](t, ctx, `ccrelay.skipped`))
	}
	dbs := storedDatabases(t, ctx)
	if !slices.Contains(dbs, "ccrelay") || !slices.Contains(dbs, "ccrelay-keys") {
		t.Fatalf("before: databases %q", dbs)
	}
	if !strings.HasPrefix(eval[string](t, ctx, `localStorage.getItem('ccrelay.token') || ''`), "ccr_") {
		t.Fatal("before: no device credential kept")
	}
	return id
}

func storedDatabases(t *testing.T, ctx context.Context) []string {
	t.Helper()
	names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`indexedDB.databases().then((l) => l.map((d) => d.name))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// shellFile is what the app shell's cache may hold: the app's own files.
var shellFile = regexp.MustCompile(`^/(|index\.html|app\.css|seal\.js|sw\.js|manifest\.webmanifest|[a-z0-9-]+\.(png|svg)|js/[a-z0-9]+\.js)$`)

// checkForgotten checks that the page says this device was signed out
// (why: a part of the text), holds no connection (nothing polls the
// relay), and that the browser keeps nothing of the device: no database
// (sessions, envelopes, the worker's credential, the device key), no
// ccrelay.* item in localStorage, no cache of anything but the app's files.
func checkForgotten(t *testing.T, ctx context.Context, why string) {
	t.Helper()
	waitAsync(t, ctx, "the signed-out page", fmt.Sprintf(`(document.querySelector('.signed-out')?.textContent || '').includes(%q)`, why))
	if !eval[bool](t, ctx, `window.ccrelay.conn === null`) {
		t.Error("the signed-out page holds a connection to the relay")
	}
	if dbs := storedDatabases(t, ctx); len(dbs) != 0 {
		t.Errorf("databases kept after signing out: %q", dbs)
	}
	if ks := eval[[]string](t, ctx, `Object.keys(localStorage).filter((k) => k.startsWith('ccrelay'))`); len(ks) != 0 {
		t.Errorf("localStorage kept after signing out: %q", ks)
	}
	cached, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(async () => { const out = []; for (const n of await caches.keys()) for (const r of await (await caches.open(n)).keys()) out.push(new URL(r.url).pathname); return out; })()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cached {
		if !shellFile.MatchString(p) {
			t.Errorf("a cache keeps %s after signing out", p)
		}
	}
}

func revokeDevice(t *testing.T, r *appRelay, name string) {
	t.Helper()
	req, _ := http.NewRequest("POST", r.base+"/api/devices/revoke", strings.NewReader(fmt.Sprintf(`{"name":%q}`, name)))
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %s", resp.Status)
	}
}

// A paired phone that opened a sealed session keeps it (IndexedDB), its
// key and its credential. Signing it out deletes all of it from the
// browser; so does a revocation it learns of, whether while it is
// connected (the relay closes its socket as revoked) or when it opens
// again with the revoked credential (the relay answers 401). Each time
// the page says it was signed out and stops: no connection, no polling.
func TestAppSignOutForgets(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)

	// Signing out.
	keptSealedSession(t, ctx, r, state)
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the sign-out button", `!!document.querySelector('.device-signout')`)
	eval[bool](t, ctx, `(window.confirm = () => true, true)`)
	click(t, ctx, ".device-signout")
	checkForgotten(t, ctx, "This device was signed out.")
	checkAccessible(t, ctx, "the signed-out page")

	// Revoked while connected.
	pairBrowserWith(t, ctx, r, state)
	keptSealedSession(t, ctx, r, state)
	start := time.Now()
	revokeDevice(t, r, "Test phone")
	checkForgotten(t, ctx, "no longer accepts its credential")
	t.Logf("revoked while connected: forgotten and said %v after the revocation", time.Since(start).Round(time.Millisecond))

	// Revoked while away: the page opens with the revoked credential.
	pairBrowserWith(t, ctx, r, state)
	keptSealedSession(t, ctx, r, state)
	must(t, ctx, chromedp.Navigate("about:blank"))
	revokeDevice(t, r, "Test phone")
	start = time.Now()
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	checkForgotten(t, ctx, "no longer accepts its credential")
	t.Logf("revoked while away: forgotten and said %v after the page opened", time.Since(start).Round(time.Millisecond))
}
