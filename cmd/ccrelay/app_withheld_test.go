package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// A relay that withholds sealed envelopes is seen: a paired phone reads a
// corpus session sent sealed, with no warning; then the relay drops one
// envelope (deleted from its store) and shows another one again in a
// later one's place. Opened afresh, the page says that 2 envelopes were
// withheld and 1 came again, from the sealed chain each envelope carries.
func TestAppShowsWithheldEnvelopes(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)

	_, id := replaySealed(t, r, state)
	r.open(t, ctx, id)
	showAll(t, ctx)
	note := `document.querySelector('.withheld-note')`
	if eval[bool](t, ctx, `(() => { const n = `+note+`; return !!n && !n.hidden })()`) {
		t.Fatalf("a warning for a session the relay passed on whole: %q", eval[string](t, ctx, note+`.textContent`))
	}

	wdb, err := sql.Open("sqlite", "file:"+filepath.Join(r.data, "relay.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	rows := storedLines(t, r.data, id)
	const dropped, replayed, into = 8, 12, 15 // seqs
	if len(rows) < into+5 {
		t.Fatalf("%d envelopes", len(rows))
	}
	key := `k = (SELECT no FROM sessions WHERE id = ?) * 4294967296 + ?`
	if res, err := wdb.ExecContext(context.Background(), `DELETE FROM envelopes WHERE `+key, id, dropped); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("drop envelope %d: %d rows", dropped, n)
	}
	// A body that starts with '{' is stored as it is (relay/codec.go).
	if res, err := wdb.ExecContext(context.Background(), `UPDATE envelopes SET body = ? WHERE `+key, rows[replayed-1], id, into); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("replay envelope %d at %d: %d rows", replayed, into, n)
	}
	// The page opens afresh, without its offline copy, from the relay.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise((ok) => { const q = indexedDB.deleteDatabase('ccrelay'); q.onsuccess = q.onerror = q.onblocked = () => ok(true); })`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id), chromedp.Reload())
	waitJS(t, ctx, "the session rendered again", fmt.Sprintf(`document.body.dataset.rendered === %q`, id))
	want := "2 envelopes were withheld by the relay; 1 envelope came out of order or again."
	if !pollJS(ctx, fmt.Sprintf(`!!%s && !%s.hidden && %s.textContent.startsWith(%q)`, note, note, note, want)) {
		t.Fatalf("the warning: %q, want %q", eval[string](t, ctx, `(`+note+` || {}).textContent || ''`), want)
	}
	if got := eval[string](t, ctx, note+`.getAttribute('role')`); got != "alert" {
		t.Errorf("the warning's role: %q", got)
	}
}
