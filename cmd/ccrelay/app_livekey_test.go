package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
)

// liveMachine is a machine's ccrelay connected to the relay: its outbox
// and client, sealing with the machine's keyring, until stop.
type liveMachine struct {
	client *apiclient.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startLiveMachine(t *testing.T, r *appRelay, box *apiclient.Outbox, kr *apiclient.Keyring, infos map[string]string) *liveMachine {
	t.Helper()
	m := &liveMachine{done: make(chan struct{}),
		client: apiclient.NewClient(apiclient.Config{URL: r.base, Token: r.token, Keyring: kr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, box)}
	for id, info := range infos {
		m.client.Announce(id, json.RawMessage(info))
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { defer close(m.done); m.client.Run(ctx) }()
	t.Cleanup(m.stop)
	return m
}

func (m *liveMachine) stop() {
	m.cancel()
	<-m.done
}

// The sessions runningSessions runs.
const runA, runB = "11111111-0000-4000-8000-00000000000a", "11111111-0000-4000-8000-00000000000b"

// runningSessions starts a relay and a machine that seals (it trusts a
// device already) with two sessions of a corpus transcript, a and b,
// flushed to the relay; the machine stays connected.
func runningSessions(t *testing.T) (r *appRelay, state string, box *apiclient.Outbox, kr *apiclient.Keyring, infos map[string]string, m *liveMachine) {
	t.Helper()
	r = startAppRelay(t)
	state = t.TempDir()
	// The machine seals: it trusts a device already.
	first, _ := seal.GenerateKeyPair()
	_, kr = trustedDevice(t, r.base, r.token, state, first)
	box, err := apiclient.OpenOutboxWith(t.TempDir(), apiclient.OutboxOptions{Sealer: kr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	transcript := corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
	envs := jsonlEnvelopes(t, transcript)
	for _, id := range []string{runA, runB} {
		var list []protocol.Envelope
		for i, e := range envs {
			e.ID = protocol.DeriveID(id, fmt.Sprint(i))
			if e.Turn != "" {
				e.Turn = protocol.DeriveID(id, e.Turn)
			}
			list = append(list, e)
		}
		if err := box.Append(context.Background(), id, list); err != nil {
			t.Fatal(err)
		}
	}
	infos = map[string]string{
		runA: `{"title":"the first running session","machine":"laptop","mode":"remote","status":"idle"}`,
		runB: `{"title":"the second running session","machine":"laptop","mode":"remote","status":"idle"}`,
	}
	m = startLiveMachine(t, r, box, kr, infos)
	ctx0, cancel0 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel0()
	if err := m.client.Flush(ctx0); err != nil {
		t.Fatal(err)
	}
	return r, state, box, kr, infos, m
}

// A phone paired with a machine while its sessions run reads them at
// once, without loading the page again: the pairing link opened in the tab
// where the app is already open pairs it (the fragment changes only), the
// machine wraps the running sessions' keys for it when it trusts it, and
// the page takes them live: the session it shows (whose envelopes it
// could not open) reads again, and the list opens the other session's
// summary.
func TestAppTrustedWhileRunningReadsLive(t *testing.T) {
	r, state, box, kr, infos, m := runningSessions(t)
	a, b := runA, runB
	// While the phone pairs, the machine's ccrelay is away: the phone
	// finds the sessions without a key for it.
	m.stop()

	// The app is open in the tab (on the relay's token), and the pairing
	// link is opened there.
	ctx := newBrowser(t)
	must(t, ctx, phone(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the list", `!!document.querySelector('li[data-session="`+a+`"]')`)
	link, wait := pairWaiting(t, r.base, r.data, state)
	must(t, ctx, chromedp.Navigate(link))
	waitAsync(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	must(t, ctx, chromedp.SetValue(chromedp.CSS("input.pair-name"), "Test phone"), chromedp.Click(chromedp.CSS(".pair-form button")))
	if res := wait(); res.code != 0 || !strings.Contains(res.stdout, "its key is confirmed") {
		t.Fatalf("pair: %+v", res)
	}
	waitAsync(t, ctx, "the list, paired", `!!document.querySelector('.device-bar') && document.querySelector('.device-bar').dataset.role === 'device' && !!document.querySelector('li[data-session="`+b+`"]')`)
	waitJS(t, ctx, "the sessions without a key", `!document.querySelector('li[data-session="`+b+`"]').textContent.includes('the second running session')`)
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+a))
	waitJS(t, ctx, "the session's envelopes said unreadable", `ccrelay.skipped.some((s) => s.includes('no key'))`)

	// The machine's ccrelay comes back (as it runs on): it trusts the phone
	// now, and wraps the keys for it.
	eval[bool](t, ctx, `(window.__samePage = true)`)
	start := time.Now()
	startLiveMachine(t, r, box, kr, infos)
	if !pollJS(ctx, `document.title.startsWith("the first running session") && document.querySelector(".skip-note").hidden && document.querySelector(".blocks").innerText.includes("spotter-a0y.2")`) {
		t.Fatalf("the session is not read again: title %q, note %.300q", eval[string](t, ctx, `document.title`), eval[string](t, ctx, `document.querySelector(".skip-note").hidden ? "" : document.querySelector(".skip-note").textContent`))
	}
	t.Logf("the shown session read %v after the machine came back", time.Since(start).Round(time.Millisecond))
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the other session's summary", `(document.querySelector('li[data-session="`+b+`"]')?.textContent || '').includes('the second running session')`)
	if !eval[bool](t, ctx, `window.__samePage === true`) {
		t.Error("the page loaded again")
	}
	t.Logf("both sessions read %v after the machine came back", time.Since(start).Round(time.Millisecond))
}

// The same with the machine's ccrelay connected all along: it wraps the
// keys for the phone once ccrelay pair trusts it, and the phone's list,
// shown right after pairing, opens both sessions' summaries without
// loading again.
func TestAppPairedWhileRunningListsLive(t *testing.T) {
	r, state, _, _, _, _ := runningSessions(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	link, wait := pairWaiting(t, r.base, r.data, state)
	must(t, ctx, chromedp.Navigate(link))
	waitAsync(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	must(t, ctx, chromedp.SetValue(chromedp.CSS("input.pair-name"), "Test phone"), chromedp.Click(chromedp.CSS(".pair-form button")))
	waitAsync(t, ctx, "the list, paired", `document.querySelector('.device-bar')?.dataset.role === 'device'`)
	eval[bool](t, ctx, `(window.__samePage = true)`)
	start := time.Now()
	if res := wait(); res.code != 0 || !strings.Contains(res.stdout, "its key is confirmed") {
		t.Fatalf("pair: %+v", res)
	}
	waitJS(t, ctx, "both summaries open", `['the first running session', 'the second running session'].every((t) => [...document.querySelectorAll('li[data-session]')].some((li) => li.textContent.includes(t)))`)
	if !eval[bool](t, ctx, `window.__samePage === true`) {
		t.Error("the page loaded again")
	}
	t.Logf("both summaries open %v after ccrelay pair trusted the phone", time.Since(start).Round(time.Millisecond))
}
