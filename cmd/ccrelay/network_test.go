package main

// The app on a bad network, in headless Chromium: it notices a dead link,
// says honestly why it is offline, comes back within seconds, and draws
// nothing while its tab is hidden. Links are impaired with
// testutil.FaultProxy between the browser and a real `ccrelay serve`.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/relay"
)

// waitFor polls a JavaScript condition until it holds, failing after
// limit, and returns how long it took.
func waitFor(t *testing.T, ctx context.Context, what, expr string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !eval[bool](t, ctx, expr) {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v; page says:\n%s", what, limit, eval[string](t, ctx, `document.body.innerText.slice(0, 2000)`))
		}
		time.Sleep(25 * time.Millisecond)
	}
	return time.Since(start)
}

// openVia loads the app from base (the relay, or a proxy in front of it)
// with timing overrides (conn.js TIMING; "" for the defaults) and opens a
// session.
func openVia(t *testing.T, ctx context.Context, base, token, timing, session string) {
	t.Helper()
	u := base + "/#token=" + token
	if timing != "" {
		u += "&timing=" + timing
	}
	must(t, ctx, chromedp.Navigate(u))
	row := chromedp.CSS(fmt.Sprintf(`li[data-session=%q] a`, session))
	must(t, ctx, chromedp.WaitVisible(row), chromedp.Click(row))
	waitJS(t, ctx, "the session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q && document.body.dataset.conn === 'open'`, session))
}

// shows is a condition: the page's conversation includes text.
func shows(text string) string {
	return fmt.Sprintf(`(() => { const b = document.querySelector('.blocks'); return !!b && b.innerText.includes(%q) })()`, text)
}

const banner = `(() => { const b = document.querySelector('.conn-banner'); return b && !b.hidden ? b.innerText : '' })()`

// A link that dies without a FIN (the phone changed networks): the page
// says it is offline within 20 s, the relay drops the dead connection
// within its heartbeat deadline, and once the path returns the page is
// current within 5 s, each row once. Default timing: what users get.
func TestAppNoticesDeadLink(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	p := testutil.StartFaultProxy(t, strings.TrimPrefix(r.base, "http://"))
	ctx := newBrowser(t)
	must(t, ctx, phone())
	openVia(t, ctx, "http://"+p.Addr, r.token, "", id)
	rowsOnce(t, ctx, 4)
	if n := p.OpenTo("/ws/app"); n != 1 {
		t.Fatalf("%d app connections, want 1", n)
	}
	cli := dialCLI(t, r) // straight to the relay: its link stays up

	// The whole path dies: open connections freeze, new ones hang.
	p.SetDeadZone(true)
	p.Blackhole()
	dead := time.Now()
	cli.envelopes(id, turn("dz", "while the link is dead", "stored while dead")...)
	var noticed, dropped time.Duration
	for noticed == 0 || dropped == 0 {
		if noticed == 0 && eval[string](t, ctx, banner) != "" && eval[string](t, ctx, `document.body.dataset.conn`) != "open" {
			noticed = time.Since(dead)
			t.Logf("the page said %q %v after the link died", eval[string](t, ctx, banner), noticed.Round(time.Millisecond))
		}
		if dropped == 0 && p.OpenTo("/ws/app") == 0 {
			dropped = time.Since(dead)
			t.Logf("the relay dropped the dead connection %v after the link died", dropped.Round(time.Millisecond))
		}
		if time.Since(dead) > 21*time.Second {
			t.Fatalf("after %v: page noticed after %v, relay dropped after %v (0: not yet)", time.Since(dead), noticed, dropped)
		}
		time.Sleep(25 * time.Millisecond)
	}
	if noticed > 20*time.Second {
		t.Errorf("the page noticed the dead link after %v, more than 20 s", noticed)
	}
	if limit := relay.HeartbeatInterval + relay.HeartbeatDeadline + time.Second; dropped > limit {
		t.Errorf("the relay dropped the dead connection after %v, more than %v", dropped, limit)
	}
	if !strings.HasPrefix(eval[string](t, ctx, banner), "Offline") {
		t.Errorf("banner %q", eval[string](t, ctx, banner))
	}
	screenshot(t, ctx, "dead-link-phone")

	// The path returns.
	p.SetDeadZone(false)
	back := waitFor(t, ctx, "the page current", shows("stored while dead")+` && document.body.dataset.conn === 'open'`, 5*time.Second)
	t.Logf("current %v after the path returned", back.Round(time.Millisecond))
	cli.envelopes(id, turn("af", "after the outage", "stored after")...)
	waitFor(t, ctx, "the next turn", shows("stored after"), 5*time.Second)
	// The recording's 4 rows, and 2 for each turn (its prompt, its answer).
	if n := eval[int](t, ctx, `document.querySelectorAll('.blocks [data-id]').length`); n != 8 {
		t.Errorf("%d rows, want 8", n)
	}
	rowsOnce(t, ctx, 6)
}

// Dead zone: new connections hang. The app gives up on each after its
// connect timeout and tries again, says the relay cannot be reached, and is
// back within 5 s of the path's return. (Shorter connect and status
// timeouts than the defaults, to keep the test short.)
func TestAppDeadZone(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	p := testutil.StartFaultProxy(t, strings.TrimPrefix(r.base, "http://"))
	ctx := newBrowser(t)
	openVia(t, ctx, "http://"+p.Addr, r.token, "connect:1500,status:1000,silence:7000", id)
	cli := dialCLI(t, r)

	p.SetDeadZone(true)
	p.Blackhole()
	cli.envelopes(id, turn("dz", "during the dead zone", "stored in the dead zone")...)
	waitFor(t, ctx, "the page offline", `document.body.dataset.conn === 'offline'`, 20*time.Second)
	if b := eval[string](t, ctx, banner); !strings.Contains(b, "cannot be reached") {
		t.Errorf("banner %q", b)
	}
	// Tries that hang are given up after the connect timeout.
	from := eval[int](t, ctx, `ccrelay.conn.timeouts`)
	waitFor(t, ctx, "two connect timeouts", fmt.Sprintf(`ccrelay.conn.timeouts >= %d`, from+2), 20*time.Second)
	if _, held := p.Accepted(); held < 2 {
		t.Errorf("%d connections held by the dead zone", held)
	}
	p.SetDeadZone(false)
	back := waitFor(t, ctx, "the page current", shows("stored in the dead zone")+` && document.body.dataset.conn === 'open'`, 5*time.Second)
	t.Logf("current %v after the dead zone ended (%d connect timeouts)", back.Round(time.Millisecond), eval[int](t, ctx, `ccrelay.conn.timeouts`))
	rowsOnce(t, ctx, 6)
}

// A relay that is down is never reported as a refused credential, however
// long it stays down; a wrong or revoked credential is reported at once.
func TestAppSaysWhyOffline(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	ctx := newBrowser(t)
	openVia(t, ctx, r.base, r.token, "", id)
	addr := strings.TrimPrefix(r.base, "http://")

	// The relay stops. What the banner says does not depend on how long
	// (each failed try is judged by its own status check), so 15 s, past
	// the backoff's cap, stands for longer outages.
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	stopped := time.Now()
	tries := eval[int](t, ctx, `ccrelay.conn.attempts ?? 0`)
	said := map[string]bool{}
	for time.Since(stopped) < 15*time.Second {
		b := eval[string](t, ctx, banner)
		said[b] = true
		if l := strings.ToLower(b); strings.Contains(l, "credential") || strings.Contains(l, "token") || strings.Contains(l, "refused") || strings.Contains(l, "login") {
			t.Fatalf("%v after the relay stopped the banner says %q", time.Since(stopped), b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := eval[string](t, ctx, `document.body.dataset.conn`); st != "offline" {
		t.Errorf("state %q after 15 s with the relay down, want offline", st)
	}
	n := eval[int](t, ctx, `ccrelay.conn.attempts ?? 0`) - tries
	t.Logf("banners while the relay was down (%d tries): %q", n, keys(said))
	if n < 4 {
		t.Errorf("%d tries in 15 s", n)
	}
	screenshot(t, ctx, "relay-down")
	r.cmd = restartServe(t, r.data, addr)
	back := waitFor(t, ctx, "the page back", `document.body.dataset.conn === 'open'`, 5*time.Second)
	t.Logf("back %v after the relay restarted", back.Round(time.Millisecond))

	// The credential is revoked (the relay restarts with another token).
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	if err := os.WriteFile(filepath.Join(r.data, relay.TokenFile), []byte("another-token-0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.cmd = restartServe(t, r.data, addr)
	restarted := time.Now()
	waitFor(t, ctx, "the credential refused", `document.body.dataset.conn === 'refused'`, 10*time.Second)
	t.Logf("revoked credential said %v after the relay came back: %q", time.Since(restarted).Round(time.Millisecond), eval[string](t, ctx, banner))
	if b := eval[string](t, ctx, banner); !strings.Contains(b, "refused this device's credential") {
		t.Errorf("banner %q", b)
	}

	// A wrong credential, on a fresh load: said at once.
	must(t, ctx, chromedp.Navigate("about:blank"))
	start := time.Now()
	must(t, ctx, chromedp.Navigate(r.base+"/#token=not-the-token"))
	waitFor(t, ctx, "a wrong credential said", `document.body.dataset.conn === 'refused'`, 2*time.Second)
	t.Logf("wrong credential said %v after loading", time.Since(start).Round(time.Millisecond))
	screenshot(t, ctx, "credential-refused")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// setHidden minimizes (hidden) or restores (visible) the browser window:
// the page's visibilityState follows.
func setHidden(t *testing.T, ctx context.Context, hide bool) {
	t.Helper()
	w, err := chromedp.Call(ctx, browser.GetWindowForTarget, browser.GetWindowForTargetParams{})
	if err != nil {
		t.Fatal(err)
	}
	state := browser.WindowStateNormal
	if hide {
		state = browser.WindowStateMinimized
	}
	if _, err := chromedp.CallBrowser(ctx, browser.SetWindowBounds, browser.SetWindowBoundsParams{WindowID: w.WindowID, Bounds: &browser.Bounds{WindowState: state}}); err != nil {
		t.Fatal(err)
	}
	want := "visible"
	if hide {
		want = "hidden"
	}
	waitJS(t, ctx, "visibility "+want, fmt.Sprintf(`document.visibilityState === %q`, want))
}

// A hidden tab draws nothing while envelopes arrive: it keeps its model
// current while its socket is open, closes the socket after hiddenClose,
// and when visible again shows everything within 1 s. (hiddenClose is 4 s
// here, against 60 s by default, and the tab is hidden for 10 s, so both
// halves are seen.)
func TestAppHiddenTab(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	ctx := newBrowser(t)
	openVia(t, ctx, r.base, r.token, "hiddenClose:4000", id)
	cli := dialCLI(t, r)
	cli.envelopes(id, turn("v0", "while visible", "seen at once")...)
	waitFor(t, ctx, "a turn while visible", shows("seen at once"), 5*time.Second)

	setHidden(t, ctx, true)
	hid := time.Now()
	// Drawing is counted twice: by the app (ccrelay.renders) and by the
	// page's DOM changing (but for the connection banner's words).
	eval[bool](t, ctx, `(() => {
		window.domChanges = 0;
		window.domChanged = [];
		new MutationObserver((ms) => {
			const seen = ms.filter((m) => !m.target.closest?.('.conn-banner') && !m.target.parentElement?.closest('.conn-banner'));
			window.domChanges += seen.length;
			for (const m of seen.slice(0, 5)) domChanged.push(m.type + ' ' + (m.attributeName || '') + ' on ' + (m.target.className || m.target.nodeName));
		})
			.observe(document.getElementById('app'), { subtree: true, childList: true, characterData: true, attributes: true });
		return true })()`)
	renders := eval[int](t, ctx, `ccrelay.renders ?? 0`)
	seq := eval[int](t, ctx, fmt.Sprintf(`ccrelay.models.get(%q).lastSeq`, id))
	round := 0
	modelGrew := false
	for time.Since(hid) < 10*time.Second {
		tag := fmt.Sprintf("h%d", round)
		cli.envelopes(id, turn(tag, "while hidden "+tag, "answer "+tag)...)
		round++
		time.Sleep(500 * time.Millisecond) // envelopes arriving over time
		if eval[int](t, ctx, fmt.Sprintf(`ccrelay.models.get(%q).lastSeq`, id)) > seq {
			modelGrew = true
		}
		if n := eval[int](t, ctx, `ccrelay.renders ?? 0`); n != renders {
			t.Fatalf("the hidden page was drawn %d times", n-renders)
		}
		if n := eval[int](t, ctx, `domChanges`); n != 0 {
			t.Fatalf("the hidden page's DOM changed %d times: %s", n, eval[string](t, ctx, `domChanged.join('; ')`))
		}
	}
	if !modelGrew {
		t.Error("the hidden tab's model did not follow the session while its socket was open")
	}
	if st := eval[string](t, ctx, `document.body.dataset.conn`); st != "paused" {
		t.Errorf("state %q after %v hidden, want paused (socket closed)", st, time.Since(hid))
	}
	last := fmt.Sprintf("answer h%d", round-1)
	setHidden(t, ctx, false)
	took := waitFor(t, ctx, "the page current", shows(last), time.Second)
	t.Logf("%d turns while hidden; current %v after visible, in %d drawings", round, took.Round(time.Millisecond), eval[int](t, ctx, `ccrelay.renders ?? 0`)-renders)
	rowsOnce(t, ctx, 6+2*round)
	if n := eval[int](t, ctx, `document.querySelectorAll('.blocks [data-id]').length`); n != 6+2*round {
		t.Errorf("%d rows, want %d", n, 6+2*round)
	}
}

// The relay answers but the session's machine is not connected: the page
// says so (not that the relay is unreachable), and stops saying it when
// the machine is back.
func TestAppSaysMachineOffline(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"cwd": "/home/dev/project", "machine": "laptop", "mode": "local", "status": "idle"})
	ctx := newBrowser(t)
	must(t, ctx, phone())
	openVia(t, ctx, r.base, r.token, "", id)
	const note = `(() => { const n = document.querySelector('.machine-note'); return !!n && !n.hidden })()`
	if eval[bool](t, ctx, note) {
		t.Fatal("machine said offline while its CLI is connected")
	}
	// The machine goes away; the page, opened afresh, says so.
	cli.c.CloseNow()
	waitStatus := time.Now().Add(waitLimit)
	for {
		if !cliConnected(t, r, id) {
			break
		}
		if time.Now().After(waitStatus) {
			t.Fatal("the relay still has the CLI")
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(r.base+"/#/s/"+id))
	waitFor(t, ctx, "the machine said offline", note, 5*time.Second)
	if b := eval[string](t, ctx, banner); b != "" {
		t.Errorf("connection banner %q while the relay is reachable", b)
	}
	text := eval[string](t, ctx, `document.querySelector('.machine-note').textContent`)
	if !strings.Contains(text, "machine is offline") || !strings.Contains(text, "relay is reachable") {
		t.Errorf("note %q", text)
	}
	screenshot(t, ctx, "machine-offline-phone")
	// It comes back and announces itself.
	cli2 := dialCLI(t, r)
	cli2.announce(id, map[string]any{"cwd": "/home/dev/project", "machine": "laptop", "mode": "local", "status": "idle"})
	waitFor(t, ctx, "the note gone", `!`+note, 5*time.Second)
}

// cliConnected asks the relay's GET /status whether session's CLI is
// connected.
func cliConnected(t *testing.T, r *appRelay, session string) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", r.base+"/status?session="+session, nil)
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct{ CLI bool }
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return a.CLI
}
