package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/chromedp/chromedp"
)

// A relay that withholds sealed envelopes is seen: a paired phone reads a
// corpus session sent sealed, with no warning; then the relay drops two
// envelopes (deleted from its store) and shows another one again in a
// later one's place. Opened afresh, the page says that 3 envelopes were
// withheld and 1 came again, from the sealed chain each envelope carries.
// The page opens a sealed session on its end and reads the earlier part
// after: one envelope is dropped in that part, the other just before the
// end it opened on, where the two parts meet.
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
	const sealedTail = 200                    // the envelopes a session opens on (app.js, TAIL)
	if len(rows) < 2*sealedTail {
		t.Fatalf("%d envelopes, want a session that opens on its end", len(rows))
	}
	key := `k = (SELECT no FROM sessions WHERE id = ?) * 4294967296 + ?`
	for _, seq := range []int{dropped, len(rows) - sealedTail} {
		if res, err := wdb.ExecContext(context.Background(), `DELETE FROM envelopes WHERE `+key, id, seq); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("drop envelope %d: %d rows", seq, n)
		}
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
	want := "3 envelopes were withheld by the relay; 1 envelope came out of order or again."
	if !pollJS(ctx, fmt.Sprintf(`!!%s && !%s.hidden && %s.textContent.startsWith(%q)`, note, note, note, want)) {
		t.Fatalf("the warning: %q, want %q", eval[string](t, ctx, `(`+note+` || {}).textContent || ''`), want)
	}
	if got := eval[string](t, ctx, note+`.getAttribute('role')`); got != "alert" {
		t.Errorf("the warning's role: %q", got)
	}
}

// A relay that withholds the last envelopes of a sealed session is seen
// too, though no later envelope names them: the machine's sealed summary
// counts what it had sealed, and the relay had taken, when it announced
// the session. A paired phone reads the session whole, with no warning;
// then the relay drops its last 2 envelopes (deleted from its store), and
// the page opened afresh says that 2 envelopes at the end were withheld.
func TestAppShowsWithheldTail(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)

	transcript := corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
	id := strings.TrimSuffix(filepath.Base(transcript), ".jsonl")
	envs := jsonlEnvelopes(t, transcript)
	kr, err := openKeyring(state)
	if err != nil {
		t.Fatal(err)
	}
	box, err := apiclient.OpenOutboxWith(t.TempDir(), apiclient.OutboxOptions{Sealer: kr})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	cl := apiclient.NewClient(apiclient.Config{URL: r.base, Token: r.token, Keyring: kr, Logger: slog.New(slog.DiscardHandler)}, box)
	cctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(cctx) }()
	defer func() { stop(); <-done }()
	for i := 0; i < len(envs); i += 50 {
		if err := box.Append(cctx, id, envs[i:min(i+50, len(envs))]); err != nil {
			t.Fatal(err)
		}
	}
	cl.Announce(id, json.RawMessage(`{"mode":"remote","status":"idle","cwd":"/w","machine":"orchard-box","title":"the tail"}`))
	fctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	rows := storedLines(t, r.data, id)
	if len(rows) != len(envs) {
		t.Fatalf("%d envelopes stored, want %d", len(rows), len(envs))
	}

	r.open(t, ctx, id)
	note := `document.querySelector('.withheld-note')`
	waitJS(t, ctx, "the end checked", fmt.Sprintf(`document.body.dataset.tailChecked === %q`, id))
	if eval[bool](t, ctx, `(() => { const n = `+note+`; return !!n && !n.hidden })()`) {
		t.Fatalf("a warning for a session the relay passed on whole: %q", eval[string](t, ctx, note+`.textContent`))
	}

	wdb, err := sql.Open("sqlite", "file:"+filepath.Join(r.data, "relay.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	key := `k = (SELECT no FROM sessions WHERE id = ?) * 4294967296 + ?`
	for _, seq := range []int{len(rows), len(rows) - 1} {
		if res, err := wdb.ExecContext(context.Background(), `DELETE FROM envelopes WHERE `+key, id, seq); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("drop envelope %d: %d rows", seq, n)
		}
	}
	// The page opens afresh, without its offline copy, from the relay.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise((ok) => { const q = indexedDB.deleteDatabase('ccrelay'); q.onsuccess = q.onerror = q.onblocked = () => ok(true); })`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id), chromedp.Reload())
	waitJS(t, ctx, "the session rendered again", fmt.Sprintf(`document.body.dataset.rendered === %q`, id))
	want := "2 envelopes at the end of this session were withheld by the relay"
	if !pollJS(ctx, fmt.Sprintf(`!!%s && !%s.hidden && %s.textContent.startsWith(%q)`, note, note, note, want)) {
		t.Fatalf("the warning: %q, want %q", eval[string](t, ctx, `(`+note+` || {}).textContent || ''`), want)
	}
}
