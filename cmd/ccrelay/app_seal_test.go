package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	_ "modernc.org/sqlite"
)

// jsonlEnvelopes is what `ccrelay replay --format jsonl` makes of a
// transcript.
func jsonlEnvelopes(t *testing.T, transcript string) []protocol.Envelope {
	t.Helper()
	var out []protocol.Envelope
	for _, l := range strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", transcript).stdout, "\n"), "\n") {
		var e protocol.Envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// pairBrowser pairs the browser of ctx with a machine (a state folder of
// its own, returned) through r, by the link `ccrelay pair` prints, and
// waits until the machine trusts it.
func pairBrowser(t *testing.T, ctx context.Context, r *appRelay) string {
	t.Helper()
	state := t.TempDir()
	pairBrowserWith(t, ctx, r, state)
	return state
}

// replaySealed sends a corpus transcript (prompts, many tool calls, cut
// results) to r sealed by the machine of state, and returns the transcript
// and its session's id.
func replaySealed(t *testing.T, r *appRelay, state string) (transcript, id string) {
	t.Helper()
	transcript = corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
	id = strings.TrimSuffix(filepath.Base(transcript), ".jsonl")
	if res := run(t, "replay", "-q", "--to", r.base, "--relay-token", r.token, "--state", state, transcript); res.code != 0 {
		t.Fatalf("replay --to: %+v", res)
	}
	return transcript, id
}

// pairBrowserWith pairs the browser of ctx with the machine of state.
func pairBrowserWith(t *testing.T, ctx context.Context, r *appRelay, state string) {
	t.Helper()
	link, wait := pairWaiting(t, r.base, r.data, state)
	must(t, ctx, chromedp.Navigate(link))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	must(t, ctx, chromedp.SetValue(chromedp.CSS("input.pair-name"), "Test phone"), chromedp.Click(chromedp.CSS(".pair-form button")))
	if res := wait(); res.code != 0 || !strings.Contains(res.stdout, "its key is confirmed") {
		t.Fatalf("pair: %+v", res)
	}
	waitJS(t, ctx, "the list", `!!document.querySelector('.device-bar')`)
	if n := eval[int](t, ctx, `JSON.parse(localStorage.getItem('ccrelay.machines') || '[]').length`); n != 1 {
		t.Fatalf("%d known machines", n)
	}
}

// A phone pairs in Chromium by the link `ccrelay pair` prints (its key
// confirmed by the waiting command), then reads a corpus session the
// machine sent sealed exactly as it shows a plaintext one (the same
// golden check), opens a cut result's full text and the session's title;
// its prompt leaves it sealed. An envelope tampered with on the relay (a
// flipped byte, one moved to another place) is shown as a note, and the
// rest still shows.
func TestAppSealedSession(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)

	transcript, id := replaySealed(t, r, state)
	envs := jsonlEnvelopes(t, transcript)
	for i, l := range storedLines(t, r.data, id) {
		if !protocol.IsSealed([]byte(l)) {
			t.Fatalf("stored envelope %d is not sealed: %.200s", i, l)
		}
	}

	r.open(t, ctx, id)
	showAll(t, ctx)
	checkShows(t, readState(t, ctx), expected(envs))
	if n := eval[int](t, ctx, `ccrelay.skipped.length`); n != 0 {
		t.Fatalf("skipped %d: %v", n, eval[[]string](t, ctx, `ccrelay.skipped`))
	}
	// A cut result's full text opens too.
	var end *protocol.Envelope
	for i := range envs {
		if e := &envs[i]; e.Ev.T == protocol.KindToolCallEnd && e.Ev.Full > 0 && e.Subagent == "" {
			end = e
			break
		}
	}
	card := fmt.Sprintf(`document.querySelector('details.tool[data-call=%q]')`, end.Ev.Call)
	waitJS(t, ctx, "the card's Show all", fmt.Sprintf(`(() => { const c = %s; if (!c) return false; c.open = true; return !!c.querySelector('.show-all') })()`, card))
	must(t, ctx, chromedp.Click(fmt.Sprintf(`details.tool[data-call=%q] .show-all`, end.Ev.Call)))
	waitJS(t, ctx, "the full result", fmt.Sprintf(`!%s.querySelector('.show-all') && %s.querySelector('.tool-body').innerText.length > 6000`, card, card))

	// A prompt leaves sealed: the relay's command holds no text. (A CLI
	// says the session takes prompts.)
	// The description is sealed as the CLI seals it: the app shows the title.
	kr, err := openKeyring(state)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kr.SealInfo(id, json.RawMessage(`{"title":"the sealed title of the session","cwd":"/home/dev/secret-folder","machine":"laptop","mode":"remote","status":"idle"}`))
	if err != nil {
		t.Fatal(err)
	}
	cli := dialCLI(t, r)
	cli.request(protocol.Frame{Type: protocol.FrameAnnounce, Session: id, Info: info})
	waitJS(t, ctx, "the prompt box", `!document.querySelector('.composer textarea').disabled`)
	waitJS(t, ctx, "the sealed title", `document.title.startsWith('the sealed title')`)
	must(t, ctx, typeInto("textarea", "the sealed prompt of the phone"), chromedp.Click(chromedp.CSS("button.send")))
	db, err := sql.Open("sqlite", "file:"+filepath.Join(r.data, "relay.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var body string
	for {
		err := db.QueryRow(`SELECT body FROM commands WHERE session = ?`, id).Scan(&body)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(body, "sealed prompt") || !strings.Contains(body, `"sealed":`) {
		t.Errorf("the relay's command: %s", body)
	}
	// What the browser sealed, the machine opens (WebCrypto to Go).
	var cmd protocol.Command
	if err := json.Unmarshal([]byte(body), &cmd); err != nil {
		t.Fatal(err)
	}
	opened, err := kr.OpenCommand(id, cmd)
	if err != nil || opened.Kind != protocol.CommandPrompt || opened.Text != "the sealed prompt of the phone" {
		t.Fatalf("the machine opens the phone's command to %+v, %v", opened, err)
	}

	// Tampering on the relay: a flipped byte in one envelope, and another
	// envelope's sealed value moved into a third's place.
	wdb, err := sql.Open("sqlite", "file:"+filepath.Join(r.data, "relay.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	rows := storedLines(t, r.data, id)
	flip, moved, into := 4, 10, 11
	var h protocol.SealedEnvelope
	json.Unmarshal([]byte(rows[flip]), &h)
	b := []byte(h.Sealed)
	b[40] ^= 1
	if b[40] == '`' || !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", rune(b[40])) {
		b[40] = 'A' + (b[40] % 26)
	}
	h.Sealed = string(b)
	flipped, _ := json.Marshal(h)
	var hm, hi protocol.SealedEnvelope
	json.Unmarshal([]byte(rows[moved]), &hm)
	json.Unmarshal([]byte(rows[into]), &hi)
	hi.Sealed = hm.Sealed
	movedRaw, _ := json.Marshal(hi)
	// And a plaintext envelope slipped in where a sealed one was.
	fake, _ := json.Marshal(map[string]any{"id": hi.ID, "time": hi.Time, "role": "user", "ev": map[string]any{"t": "text", "text": "a prompt the relay made up"}})
	plainAt := 20
	for seq, raw := range map[int][]byte{flip + 1: flipped, into + 1: movedRaw, plainAt + 1: fake} {
		// A body that starts with '{' is stored as it is (relay/codec.go).
		res, err := wdb.ExecContext(context.Background(), `UPDATE envelopes SET body = ? WHERE k = (SELECT no FROM sessions WHERE id = ?) * 4294967296 + ?`, raw, id, seq)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("tamper with envelope %d: %d rows", seq, n)
		}
	}
	// The page opens afresh, without its offline copy (which holds the
	// envelopes as they were), from the relay.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise((ok) => { const q = indexedDB.deleteDatabase('ccrelay'); q.onsuccess = q.onerror = q.onblocked = () => ok(true); })`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id), chromedp.Reload())
	waitJS(t, ctx, "the session rendered again", fmt.Sprintf(`document.body.dataset.rendered === %q`, id))
	if !pollJS(ctx, `ccrelay.skipped.length === 3`) {
		t.Fatalf("notes: %q", eval[[]string](t, ctx, `ccrelay.skipped`))
	}
	notes := eval[[]string](t, ctx, `ccrelay.skipped`)
	changed, plain := 0, 0
	for _, n := range notes {
		switch {
		case strings.Contains(n, "changed"):
			changed++
		case strings.Contains(n, "plaintext envelope"):
			plain++
		}
	}
	if changed != 2 || plain != 1 {
		t.Errorf("notes %q: want two changed, one plaintext", notes)
	}
	if eval[bool](t, ctx, `document.querySelector('.blocks').innerText.includes('a prompt the relay made up')`) {
		t.Error("the page shows the relay's plaintext envelope")
	}
	showAll(t, ctx)
	st := readState(t, ctx)
	if len(st.IDs) < len(expected(envs).IDs)-2 && st.Tools < expected(envs).Tools-2 {
		t.Errorf("after tampering the page shows %d rows, %d tools", len(st.IDs), st.Tools)
	}
	if strings.Contains(eval[string](t, ctx, `document.querySelector('.skip-note').textContent`), "Skipped 3 things") == false {
		t.Errorf("note: %q", eval[string](t, ctx, `document.querySelector('.skip-note').textContent`))
	}
	// The list shows the title and folder it opened; the relay lists neither.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the list's row", fmt.Sprintf(`(() => { const r = document.querySelector('li[data-session=%q]'); return !!r && r.textContent.includes('the sealed title') && r.textContent.includes('secret-folder') })()`, id))
	for _, l := range []string{"the sealed title", "secret-folder"} {
		var infoRow string
		if err := db.QueryRow(`SELECT info FROM sessions WHERE id = ?`, id).Scan(&infoRow); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(infoRow, l) {
			t.Errorf("the relay's session row holds %q", l)
		}
	}
}

// A relay that answers the redemption with another machine key than the
// link's is caught by the app: it says so, and keeps no credential.
func TestAppPairingRefusesSwappedKey(t *testing.T) {
	r := startAppRelay(t)
	link, _ := pairWaiting(t, r.base, r.data, t.TempDir())
	// The link names another machine than the one that asked the relay:
	// the relay's answer (the real machine's key) differs from it, as when
	// a relay swaps the key it passes on.
	i := strings.Index(link, "#pair=") + len("#pair=")
	parts := strings.Split(link[i:], ".")
	other := make([]byte, 32)
	other[0] = 9
	parts[1] = base64.RawURLEncoding.EncodeToString(other)
	swapped := link[:i] + strings.Join(parts, ".")
	ctx := newBrowser(t)
	must(t, ctx, phone(), chromedp.Navigate(swapped))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	click(t, ctx, ".pair-form button")
	waitJS(t, ctx, "the refusal", `(() => { const e = document.querySelector('.pair-error'); return !!e && !e.hidden && e.textContent.includes("changed the machine's key") })()`)
	if tok := eval[string](t, ctx, `localStorage.getItem('ccrelay.token') || ''`); tok != "" {
		t.Errorf("a credential was kept: %.8q…", tok)
	}
	if n := eval[int](t, ctx, `JSON.parse(localStorage.getItem('ccrelay.machines') || '[]').length`); n != 0 {
		t.Errorf("%d machines kept", n)
	}
}

// Time to open a 10,000-envelope session (page load to first paint of its
// end), sealed and in plaintext, from a cold start each time: the app's
// offline copy and the browser's cache are cleared before every load, so
// that each load reads the session from the relay (and a sealed one opens
// every envelope it shows). The two are loaded in turn, in one browser,
// so that a busy machine weighs on both; the medians are logged with their
// ratio (not bounded: on a loaded shared machine it varies from run to run
// by more than the 15% goal; see security.md). Both open the same way, on
// the same end: the first paint follows the reading (and, sealed, the
// openings) of its last screenfuls only, and the earlier part is read after
// it up to the end shown, so that each envelope is opened once.
func TestAppOpensLargeSealedSession(t *testing.T) {
	plain := startAppRelay(t)
	pid, penvs := largeSession(t, plain)
	sealed := startAppRelay(t)
	// Fifteen cold opens of a 10,857-envelope session, and the setup: more
	// than the 3 minutes newBrowser gave on a loaded machine (199 s seen in a
	// whole-suite run).
	ctx := newBrowserFor(t, 10*time.Minute)
	state := pairBrowser(t, ctx, sealed)
	src := filepath.Join(t.TempDir(), pid+".jsonl")
	writeLargeTranscript(t, src)
	if res := run(t, "replay", "-q", "--to", sealed.base, "--relay-token", sealed.token, "--state", state, src); res.code != 0 {
		t.Fatalf("replay --to: %+v", res)
	}
	// The same browser holds both: another origin, another credential.
	must(t, ctx, chromedp.Navigate(plain.base+"/#token="+plain.token), chromedp.WaitVisible(chromedp.CSS(".session-row")))
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchOpening}); err != nil {
		t.Fatal(err)
	}
	const loads = 7
	var tp, ts []time.Duration
	for i := range loads {
		if i%2 == 0 {
			tp = append(tp, openCold(t, ctx, plain, pid))
			ts = append(ts, openCold(t, ctx, sealed, pid))
		} else {
			ts = append(ts, openCold(t, ctx, sealed, pid))
			tp = append(tp, openCold(t, ctx, plain, pid))
		}
	}
	if n := eval[int](t, ctx, `ccrelay.skipped.length`); n != 0 {
		t.Fatalf("skipped %d: %v", n, eval[[]string](t, ctx, `ccrelay.skipped`))
	}
	// How the last sealed load opened the session: its end first (the
	// first paint after the openings of a screenful or so, not of the whole
	// session), its envelopes side by side (not one after the other), and
	// its key asked with the list, not after the list came; the earlier envelopes were opened after the paint.
	if n := eval[int](t, ctx, `watched.atPaint`); n <= 0 || n >= 500 {
		t.Errorf("the end was drawn after %d envelopes were opened, want fewer than 500 (its end's)", n)
	} else {
		t.Logf("the end was drawn after %d envelopes were opened", n)
	}
	if !pollJS(ctx, fmt.Sprintf(`watched.opened >= %d`, len(penvs))) {
		t.Errorf("%d envelopes opened, want all %d: the earlier ones in the background", eval[int](t, ctx, `watched.opened`), len(penvs))
	}
	// Each envelope was opened once: the earlier part was read up to the
	// end shown, not again with it.
	if !pollJS(ctx, fmt.Sprintf(`document.body.dataset.earlier === %q && watched.now === 0`, pid)) {
		t.Errorf("the earlier part was not read")
	} else if n := eval[int](t, ctx, `watched.opened`); n > len(penvs)+10 {
		t.Errorf("%d envelopes opened for a session of %d: the end shown was read and opened again with the earlier part", n, len(penvs))
	}
	checkOpenedOnEnd(t, ctx, "sealed", len(penvs))
	if n := eval[int](t, ctx, `watched.most`); n < 50 {
		t.Errorf("at most %d envelopes were being opened at once: one after the other", n)
	}
	if sent := eval[[]string](t, ctx, `watched.sent`); slices.Index(sent, "session-key") < 0 || slices.Index(sent, "session-key") > slices.Index(sent, "list") {
		t.Errorf("the session's key was asked after the list: sent %v", sent)
	}
	// A plaintext session opens the same way: on the same end, the earlier
	// part after the paint, up to the end shown.
	openCold(t, ctx, plain, pid)
	if !pollJS(ctx, fmt.Sprintf(`document.body.dataset.earlier === %q`, pid)) {
		t.Errorf("the earlier part of the plaintext session was not read")
	}
	checkOpenedOnEnd(t, ctx, "plaintext", len(penvs))
	slices.Sort(tp)
	slices.Sort(ts)
	mp, ms := tp[loads/2], ts[loads/2]
	ratio := float64(ms) / float64(mp)
	t.Logf("%d envelopes, cold: opened in %v in plaintext, %v sealed (%.2f×; medians of %d loads: %v and %v)", len(penvs), mp, ms, ratio, loads, tp, ts)
	if ms > 5*time.Second {
		t.Errorf("a sealed 10,000-envelope session took %v to open", ms)
	}
}

// checkOpenedOnEnd checks, with watchOpening's record of the page's
// subscriptions, that the session of total envelopes opened on its last
// 200 (app.js, TAIL) and read the earlier part on a subscription bounded
// by the first envelope shown.
func checkOpenedOnEnd(t *testing.T, ctx context.Context, what string, total int) {
	t.Helper()
	const tail = 200
	subs := eval[[]map[string]int](t, ctx, `watched.subs`)
	end, earlier := -1, -1
	for i, s := range subs {
		if s["after"] > 0 && end < 0 {
			end = i
		}
		if s["before"] > 0 && earlier < 0 {
			earlier = i
		}
	}
	if end < 0 || total-subs[end]["after"] != tail {
		t.Errorf("%s: subscribed %v, want the end first: after %d", what, subs, total-tail)
		return
	}
	if earlier < 0 || subs[earlier]["after"] != 0 || subs[earlier]["before"] != subs[end]["after"]+1 {
		t.Errorf("%s: subscribed %v, want the earlier part from 0 before %d", what, subs, subs[end]["after"]+1)
	}
}

// watchOpening, run in each page before the app, counts the sealed values
// the page opens (WebCrypto decryptions), how many at most at once, how
// many were opened when the session was first painted, the types of the
// frames the page sends, in order, and the bounds of its subscriptions.
const watchOpening = `(() => {
  self.watched = { opened: 0, now: 0, most: 0, atPaint: -1, sent: [], subs: [] };
  const mark = Performance.prototype.mark;
  Performance.prototype.mark = function (name, ...rest) {
    if (name === 'ccrelay:session-painted' && watched.atPaint < 0) watched.atPaint = watched.opened;
    return mark.call(this, name, ...rest);
  };
  const decrypt = SubtleCrypto.prototype.decrypt;
  SubtleCrypto.prototype.decrypt = function (...args) {
    watched.opened++;
    watched.most = Math.max(watched.most, ++watched.now);
    const p = decrypt.apply(this, args);
    p.then(() => watched.now--, () => watched.now--);
    return p;
  };
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    try {
      const f = JSON.parse(data);
      watched.sent.push(f.type);
      if (f.type === 'subscribe') watched.subs.push({ after: f.after || 0, before: f.before || 0 });
    } catch {}
    return send.call(this, data);
  };
})()`

// openCold is openTimed from a cold start: the app's offline copy (its
// database) and the browser's cache are cleared first. It fails unless
// the session shown came from the relay (a first batch before the first
// drawing) and not from an offline copy.
func openCold(t *testing.T, ctx context.Context, r *appRelay, id string) time.Duration {
	t.Helper()
	// A page of the origin that is not the app (which holds the database
	// open) nor kept by its service worker (which passes /status by).
	must(t, ctx, chromedp.Navigate(r.base+"/status"))
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise((ok) => { const q = indexedDB.deleteDatabase('ccrelay'); q.onsuccess = () => ok(true); q.onerror = () => ok(false); })`, chromedp.EvalAwaitPromise)); err != nil || !ok {
		t.Fatalf("clear the offline copy: %v %v", ok, err)
	}
	if left, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`indexedDB.databases().then((l) => l.some((d) => d.name === 'ccrelay'))`, chromedp.EvalAwaitPromise)); err != nil || left {
		t.Fatalf("the offline copy is still there: %v %v", left, err)
	}
	if _, err := chromedp.Call(ctx, network.ClearBrowserCache, cdp.Empty{}); err != nil {
		t.Fatalf("clear the cache: %v", err)
	}
	d := openTimed(t, ctx, r, id)
	if !eval[bool](t, ctx, `(() => { const b = performance.getEntriesByName('ccrelay:first-batch')[0], p = performance.getEntriesByName('ccrelay:session-rendered')[0]; return !!b && !!p && b.startTime <= p.startTime && !document.body.dataset.offlineCopy })()`) {
		t.Fatalf("the session was not read from the relay before it was drawn (an offline copy?)")
	}
	return d
}

// pollJS reports whether expr became true within 30 s.
func pollJS(ctx context.Context, expr string) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr)); err == nil && v {
			return true
		}
		time.Sleep(25 * time.Millisecond)
	}
	return false
}
