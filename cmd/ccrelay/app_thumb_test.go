package main

// The app under one thumb: tap targets, what the header and the notes say,
// at a phone's size (390×844 CSS px, device scale 3, touch).

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/chromedp/chromedp"
)

// phoneThumb is a 6.1-inch phone: 390×844 CSS px at device scale 3, touch.
func phoneThumb() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3), chromedp.EmulateMobile, chromedp.EmulateTouch)
}

// MinTarget is the least hit area of a control, in CSS px, both ways
// (Apple's Human Interface Guidelines; Material asks 48 dp).
const MinTarget = 44

// hitTargets walks every control shown in the part of the page that
// root (a CSS selector) names: buttons, links outside prose, details
// toggles, inputs. Each is brought into view (above the dock, below the
// top bar) and measured the way a finger finds it: through its centre,
// how far left, right, up and down a tap still lands on it (the browser's
// own hit test, elementFromPoint: padding, an enlarging ::before or
// ::after count; a neighbour over it does not). It returns each control's
// name and its hit width and height (capped at 80), and the other controls
// a tap lands on within half a target of its centre (a square of
// 2·half+1 px, probed every 3 px, diagonals included): a thumb aimed at
// the control and off by up to that much must not hit a neighbour.
const hitTargets = `((rootSel, half) => {
	const root = document.querySelector(rootSel);
	if (!root) return [{ name: 'no ' + rootSel, w: 0, h: 0 }];
	const sel = 'button, a[href], summary, input:not([type=hidden]), select, textarea, [role=button], [tabindex]:not([tabindex="-1"])';
	const out = [];
	const name = (el) => {
		const label = el.getAttribute('aria-label') || el.getAttribute('title') || el.textContent.trim().replace(/\s+/g, ' ').slice(0, 40) || el.getAttribute('placeholder') || '';
		const cls = (el.getAttribute('class') || '').split(/\s+/).filter(Boolean).slice(0, 2).join('.');
		return el.tagName.toLowerCase() + (cls ? '.' + cls : '') + ' "' + label + '"';
	};
	// The band a control scrolled into view is seen in: below what sticks
	// at the top, above the dock.
	const band = () => {
		let top = 0, bottom = innerHeight;
		for (const s of document.querySelectorAll('.top, .find-bar, .conn-banner, .task-strip, .skip-note')) {
			const r = s.getBoundingClientRect();
			if (r.height && getComputedStyle(s).position !== 'static' && r.top < innerHeight / 3) top = Math.max(top, r.bottom);
		}
		const dock = document.querySelector('.dock');
		if (dock && dock.getClientRects().length && !root.closest('dialog')) bottom = Math.min(bottom, dock.getBoundingClientRect().top);
		return [top, bottom];
	};
	for (const el of root.querySelectorAll(sel)) {
		if (!el.getClientRects().length) continue; // not drawn
		const cs = getComputedStyle(el);
		if (cs.visibility === 'hidden' || el.closest('.copy-buffer, .sr-only')) continue;
		if (el.matches('a') && el.closest('.md')) continue; // a link in prose
		// A control inside a label is also hit through its label.
		const target = el.matches('input, select, textarea') && el.closest('label') || el;
		const hits = (x, y) => { const e = document.elementFromPoint(x, y); return !!e && target.contains(e); };
		el.scrollIntoView({ block: 'center', inline: 'center' });
		let r = el.getBoundingClientRect();
		let cx = r.left + r.width / 2, cy = r.top + r.height / 2;
		if (!hits(cx, cy) && !el.closest('.top, .dock, .find-bar, dialog')) {
			const [top, bottom] = band();
			scrollBy(0, cy - (top + bottom) / 2);
			r = el.getBoundingClientRect();
			cx = r.left + r.width / 2; cy = r.top + r.height / 2;
		}
		if (!hits(cx, cy)) {
			const e = document.elementFromPoint(cx, cy);
			out.push({ name: name(el) + ' (covered by ' + (e ? name(e) : 'nothing') + ')', w: 0, h: 0 });
			continue;
		}
		const reach = (dx, dy) => { let n = 0; while (n < 40 && hits(cx + dx * (n + 1), cy + dy * (n + 1))) n++; return n; };
		// Neighbours within reach of a thumb aimed at this one: another
		// control (not one holding this one, nor a link in prose).
		const near = new Set();
		for (let dy = -half; dy <= half; dy += 3) {
			for (let dx = -half; dx <= half; dx += 3) {
				const e = document.elementFromPoint(cx + dx, cy + dy);
				if (!e || target.contains(e)) continue;
				const c = e.closest(sel);
				if (!c || c.contains(target) || (c.matches('a') && c.closest('.md'))) continue;
				near.add(name(c));
			}
		}
		out.push({ name: name(el), w: reach(-1, 0) + reach(1, 0) + 1, h: reach(0, -1) + reach(0, 1) + 1, near: [...near] });
	}
	return out;
})`

// hitArea is one control's measured hit area, and the neighbours a tap
// aimed at it may land on.
type hitArea struct {
	Name string   `json:"name"`
	W    float64  `json:"w"`
	H    float64  `json:"h"`
	Near []string `json:"near"`
}

// smallTargets measures the controls under root and returns those under
// MinTarget either way or with a neighbour within MinTarget/2 of their
// centre, and how many were measured.
func smallTargets(t *testing.T, ctx context.Context, root string) ([]string, int) {
	t.Helper()
	all := eval[[]hitArea](t, ctx, hitTargets+fmt.Sprintf("(%q, %d)", root, MinTarget/2-1))
	var small []string
	for _, a := range all {
		if a.W < MinTarget || a.H < MinTarget {
			small = append(small, fmt.Sprintf("%s: %.0f×%.0f", a.Name, a.W, a.H))
		}
		if len(a.Near) > 0 {
			small = append(small, fmt.Sprintf("%s: a tap within %d px of its centre lands on %s", a.Name, MinTarget/2-1, strings.Join(a.Near, ", ")))
		}
	}
	return small, len(all)
}

// Every control the app shows at a phone's size can be hit with a thumb:
// a hit area of at least 44×44 CSS px (where the drawing is smaller,
// padding or a pseudo-element makes it up), not overlapped by a
// neighbour's, and no other control within 21 px of its centre, diagonals
// included (a thumb aimed at it and off by that much hits nothing else).
// One walk measures every control of the list, the notifications sheet,
// the new-session sheet (a machine's daemon) on both its tabs, a session
// (tool cards, thinking, subagents, Markdown, the todo strip, copy
// buttons, the composer), a permission card with its forms open, the find
// bar, the settings sheet, the usage page with its table and per-session
// totals open, and the pages a device sees before it is paired (the token
// page, the pairing page), and names each one that is too small or too
// near another.
func TestAppTapTargets(t *testing.T) {
	r := startAppRelay(t)
	id := seedEverything(t, r)
	usage := seedUsageShots(t, r)
	// A machine's daemon, for the new-session sheet: two folders, one
	// with a past session to resume.
	const machine = "0c0c0c0c-aaaa-4222-8333-444444444444"
	now := time.Now().UnixMilli()
	dialCLI(t, r).announce(machine, map[string]any{"mode": "machine", "status": "idle", "machine": "laptop", "title": "laptop",
		"daemon": map[string]any{"os": "linux", "arch": "amd64", "roots": []string{"/home/dev"}, "running": []string{},
			"folders": []map[string]any{
				{"dir": "/home/dev/project", "at": now, "sessions": []map[string]any{{"id": "0c0c0c0c-bbbb-4222-8333-444444444444", "prompt": "Fix the flaky test", "at": now}}},
				{"dir": "/home/dev/other", "at": now - 3600_000}}}})
	ctx := newBrowser(t)
	must(t, ctx, phoneThumb())
	var small []string
	measure := func(page, root string, least int) {
		t.Helper()
		s, n := smallTargets(t, ctx, root)
		t.Logf("%s: %d controls measured", page, n)
		if n < least {
			t.Errorf("%s: only %d controls measured, want at least %d", page, n, least)
		}
		for _, x := range s {
			small = append(small, page+": "+x)
		}
	}

	// The usage page counts the sessions the device keeps: those read here.
	for _, u := range usage {
		r.open(t, ctx, u)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the list", fmt.Sprintf(`document.querySelectorAll('.session-row').length === %d && !document.querySelector('.new-session-btn').hidden`, 4+len(usage)))
	measure("the list", "body", 12)

	click(t, ctx, `button[aria-label="Notifications"]`)
	waitJS(t, ctx, "the notifications sheet", `(() => { const d = document.querySelector('dialog.sheet[open] .notify-sheet'); return !!d && !d.querySelector('[role=status]').textContent.startsWith('Asking') })()`)
	measure("the notifications sheet", "dialog.sheet", 4)
	click(t, ctx, `dialog.sheet[open] button[value="close"]`)
	waitJS(t, ctx, "the sheet closed", `!document.querySelector('dialog.sheet[open]')`)

	click(t, ctx, `button.new-session-btn`)
	waitJS(t, ctx, "the new-session sheet", `!!document.querySelector('dialog.sheet[open] .new-session .folder, dialog.sheet[open] .new-session li button')`)
	measure("the new-session sheet", "dialog.sheet", 8)
	eval[bool](t, ctx, `(() => { document.querySelector('dialog.sheet[open] .new-session li.folder').click(); return true })()`)
	eval[bool](t, ctx, `(() => { [...document.querySelectorAll('dialog.sheet[open] [role=tab]')].find((b) => b.textContent.startsWith('Resume')).click(); return true })()`)
	waitJS(t, ctx, "the past sessions", `!!document.querySelector('dialog.sheet[open] .past-sessions button')`)
	measure("the new-session sheet, resuming", "dialog.sheet", 6)
	click(t, ctx, `dialog.sheet[open] button[value="close"]`)
	waitJS(t, ctx, "the sheet closed", `!document.querySelector('dialog.sheet[open]')`)

	click(t, ctx, `header a[href="#/usage"]`)
	waitJS(t, ctx, "the chart drawn", `document.body.dataset.usage === 'drawn' && document.querySelectorAll('svg.usage-chart rect.usage-bar').length > 0`)
	eval[bool](t, ctx, `(() => { for (const d of document.querySelectorAll('.usage-page details')) d.open = true; return true })()`)
	waitJS(t, ctx, "the per-session totals", fmt.Sprintf(`document.querySelectorAll('.usage-sessions li a').length === %d`, len(usage)))
	measure("the usage page", "main.usage-page", 2+len(usage))

	r.open(t, ctx, id)
	showAll(t, ctx)
	waitJS(t, ctx, "the request", `!!document.querySelector('.perm[data-request="req-1"]')`)
	eval[bool](t, ctx, `(() => { for (const d of document.querySelectorAll('details.tool, details.sub, details.thinking, details.mchip')) d.open = true; return true })()`)
	waitJS(t, ctx, "the cards open", `[...document.querySelectorAll('details.tool')].every((d) => d.querySelector('.tool-body'))`)
	waitJS(t, ctx, "the task strip", `!document.querySelector('.task-strip').hidden`)
	click(t, ctx, ".task-strip > summary")
	measure("a session", "body", 20)
	measure("the permission card", ".perm", 4)
	eval[bool](t, ctx, `(() => { for (const b of document.querySelectorAll('.perm button.deny-why, .perm button.edit-first')) b.click(); return true })()`)
	measure("the permission card, its forms open", ".perm", 6)
	screenshot(t, ctx, "thumb-session")

	must(t, ctx, chromedp.Click(chromedp.CSS(`button[aria-label="Find in session"]`)), typeInto(`input[aria-label="Find in session"]`, "zebrafish"))
	waitJS(t, ctx, "highlights", `!!document.querySelector('mark.find-hit.current')`)
	measure("the find bar", ".find-bar", 4)
	click(t, ctx, `button[aria-label="Close find"]`)

	must(t, ctx, chromedp.Click(chromedp.CSS(`button[aria-label="Session settings"]`)), chromedp.WaitVisible(chromedp.CSS("dialog.sheet select")))
	measure("the settings sheet", "dialog.sheet", 4)
	screenshot(t, ctx, "thumb-settings")

	// Before pairing: a browser with no credential.
	fresh := newBrowser(t)
	must(t, fresh, phoneThumb(), chromedp.Navigate(r.base+"/"))
	waitJS(t, fresh, "the token page", `!!document.querySelector('.token-form input[aria-label="Token"]')`)
	s, n := smallTargets(t, fresh, "body")
	t.Logf("the token page: %d controls measured", n)
	small = append(small, prefixed("the token page: ", s)...)
	must(t, fresh, chromedp.Navigate("about:blank"), chromedp.Navigate(r.base+"/#pair=ABCD2345.abcdefgh"))
	waitJS(t, fresh, "the pairing page", `!!document.querySelector('.pair-page input.pair-name')`)
	s, n = smallTargets(t, fresh, "body")
	t.Logf("the pairing page: %d controls measured", n)
	small = append(small, prefixed("the pairing page: ", s)...)

	if len(small) > 0 {
		t.Errorf("%d controls with a hit area under %d×%d CSS px:\n  %s", len(small), MinTarget, MinTarget, strings.Join(small, "\n  "))
	}
}

// prefixed is each of list with p before it.
func prefixed(p string, list []string) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = p + x
	}
	return out
}

// longSession is a corpus session long enough to scroll a phone's screen
// many times over.
const longSession = "/public/spotter/test/fixtures/transcripts/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"

// What the app says while the relay cannot be reached is plain text where
// the eye is: the banners show commands as code, never Markdown's
// backticks; an offline copy opens at its end with the "stale since" note
// on screen beside the prompt box (not at the top, a long scroll away);
// and the prompt box says a message waits until the relay is back.
func TestAppOfflineCopyWhereTheEyeIs(t *testing.T) {
	r := startAppRelay(t)
	id, envs := r.replay(t, corpus+longSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"cwd": "/home/dev/spotter", "machine": "laptop", "mode": "remote", "status": "idle"})
	ctx := newBrowser(t)
	must(t, ctx, phoneThumb())
	plain := func(state, command string) {
		t.Helper()
		waitJS(t, ctx, "the "+state+" banner", fmt.Sprintf(`(() => { const b = document.querySelector('.conn-banner'); return !!b && !b.hidden && b.dataset.state === %q })()`, state))
		text := eval[string](t, ctx, `document.querySelector('.conn-banner').textContent`)
		if strings.Contains(text, "`") {
			t.Errorf("the %s banner shows backticks: %q", state, text)
		}
		if got := eval[string](t, ctx, `[...document.querySelectorAll('.conn-banner code')].map((c) => c.textContent).join('|')`); got != command {
			t.Errorf("the %s banner's commands: %q, want %q (%q)", state, got, command, text)
		}
	}
	// A credential the relay refuses.
	must(t, ctx, chromedp.Navigate(r.base+"/#token=not-the-token"))
	plain("refused", "ccrelay pair")
	// (The service worker, installing, is not cut short by leaving.)
	waitJS(t, ctx, "the service worker controlling the page", `!!navigator.serviceWorker.controller`)
	must(t, ctx, chromedp.Navigate("about:blank"))

	r.open(t, ctx, id)
	waitJS(t, ctx, "the service worker controlling the page again", `!!navigator.serviceWorker.controller`)
	waitAsync(t, ctx, "the session kept for offline reading", fmt.Sprintf(
		`import('./js/offline.js').then((m) => m.savedSessions()).then((l) => l.some((s) => s.id === %q && s.last === %d))`, id, len(envs)))
	if p := eval[string](t, ctx, `document.querySelector('.composer textarea').placeholder`); p != "Message Claude…" {
		t.Errorf("online, the prompt box says %q", p)
	}

	// The relay goes away; the session, opened again, is the saved copy.
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id), chromedp.Reload())
	waitJS(t, ctx, "the saved copy shown", fmt.Sprintf(`document.body.dataset.offlineCopy === %q && document.body.dataset.rendered === %q`, id, id))
	waitJS(t, ctx, "said to be stale", `(() => { const n = document.querySelector('.stale-note'); return !!n && !n.hidden && n.textContent.includes('stale since'); })()`)
	plain("offline", "ccrelay serve")
	// At the end, where it opened.
	waitJS(t, ctx, "the end of the session in view", `(() => { const s = document.scrollingElement; return s.scrollHeight > 3 * innerHeight && s.scrollHeight - s.scrollTop - s.clientHeight < 2 })()`)
	where := eval[map[string]float64](t, ctx, `(() => { const n = document.querySelector('.stale-note').getBoundingClientRect(), c = document.querySelector('.composer').getBoundingClientRect();
		return { top: n.top, bottom: n.bottom, composer: c.top, height: innerHeight } })()`)
	t.Logf("stale note at %.0f–%.0f px, the prompt box at %.0f, the screen %.0f px tall", where["top"], where["bottom"], where["composer"], where["height"])
	if where["top"] < 0 || where["bottom"] > where["height"] || where["composer"]-where["bottom"] > 120 || where["bottom"] > where["composer"] {
		t.Errorf("the stale note is at %.0f–%.0f px, the prompt box at %.0f: not where the eye is", where["top"], where["bottom"], where["composer"])
	}
	p := eval[string](t, ctx, `document.querySelector('.composer textarea').placeholder`)
	if !strings.Contains(p, "sent when") || !strings.Contains(p, "back") {
		t.Errorf("offline, the prompt box says %q: not that a message waits until the relay is back", p)
	}
	screenshot(t, ctx, "thumb-offline-copy")
}

// visibleTitle counts the characters of the top bar's title a person
// sees (inside its box: not clipped, not behind an ellipsis).
const visibleTitle = `(() => {
	const el = document.querySelector('.top-title'), box = el.getBoundingClientRect();
	const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
	const range = document.createRange();
	let n = 0, text = '';
	for (let node = walk.nextNode(); node; node = walk.nextNode()) {
		for (let i = 0; i < node.length; i++) {
			range.setStart(node, i); range.setEnd(node, i + 1);
			const r = range.getBoundingClientRect();
			if (r.width > 0 && r.right <= box.right + 0.5 && r.bottom <= box.bottom + 0.5 && r.top >= box.top - 0.5) { n++; text += node.data[i]; }
		}
	}
	// An ellipsis drawn over the end hides a few characters counted in.
	if (el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1) n = Math.max(0, n - 3);
	return { n, text };
})()`

// The top bar of a session says what it is and what is true of it, with
// one thumb: a long title shows most of itself (two lines, not ten
// characters), and the state never says "Remote · idle" beside "Claude's
// machine is offline"; the list marks the sessions the relay found without
// their machine.
func TestAppHeaderSaysTheTruth(t *testing.T) {
	r := &appRelay{data: t.TempDir()}
	r.cmd, r.base, r.token = startServe(t, r.data, "--cli-gone-after", "1s")
	t.Cleanup(func() { r.cmd.Process.Signal(syscall.SIGTERM); r.cmd.Wait() })
	const (
		working = "0c0c0c0c-7777-4222-8333-444444444444"
		idle    = "0c0c0c0c-8888-4222-8333-444444444444"
		title   = "Find why the reconnect test in relay/conn_test.go is flaky under load and make it fast again"
	)
	cli1, cli2 := dialCLI(t, r), dialCLI(t, r)
	cli1.envelopes(working, turn("w", title, "Looking into it.")...)
	cli1.announce(working, map[string]any{"cwd": "/home/dev/project", "machine": "laptop", "mode": "remote", "status": "busy"})
	cli2.envelopes(idle, turn("i", "Tidy the docs", "Done.")...)
	cli2.announce(idle, map[string]any{"cwd": "/home/dev/docs", "machine": "desktop", "mode": "remote", "status": "idle"})

	ctx := newBrowser(t)
	must(t, ctx, phoneThumb())
	r.open(t, ctx, working)
	waitJS(t, ctx, "the title", fmt.Sprintf(`document.querySelector('.top-title').textContent.startsWith(%q)`, title[:40]))
	seen := eval[struct {
		N    int    `json:"n"`
		Text string `json:"text"`
	}](t, ctx, visibleTitle)
	t.Logf("the title shows %d of its %d characters: %q", seen.N, len(title), seen.Text)
	if seen.N < 40 {
		t.Errorf("the title shows %d of its %d characters (%q)", seen.N, len(title), seen.Text)
	}
	statusText := func() string {
		return eval[string](t, ctx, `document.querySelector('.top-sub .status-text').textContent`)
	}
	if s := statusText(); s != "Working" {
		t.Errorf("working, the top bar says %q", s)
	}
	screenshot(t, ctx, "thumb-header")

	// Both machines go away; the relay marks both sessions (the working
	// one becomes idle with the reason).
	cli1.c.CloseNow()
	cli2.c.CloseNow()
	waitJS(t, ctx, "the relay's mark", fmt.Sprintf(`ccrelay.sessions.get(%q).info.cliGone > 0`, working))
	const note = `(() => { const n = document.querySelector('.machine-note'); return !!n && !n.hidden })()`
	waitJS(t, ctx, "the page saying the machine is offline", note)
	if s := statusText(); !strings.Contains(strings.ToLower(s), "offline") {
		t.Errorf("the machine gone, the top bar says %q", s)
	}

	// The idle session, opened afresh: no ccrelay holds it (the relay's
	// mark, or its answer when asked); the top bar says the same as the note.
	must(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(r.base+"/#/s/"+idle))
	waitJS(t, ctx, "the page saying the machine is offline", note)
	if s := statusText(); s == "Remote · idle" || !strings.Contains(strings.ToLower(s), "offline") {
		t.Errorf("beside %q, the top bar says %q", eval[string](t, ctx, `document.querySelector('.machine-note').textContent`), s)
	}
	screenshot(t, ctx, "thumb-header-offline")

	// The list marks the sessions whose machine the relay found gone,
	// working or idle.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the list", `document.querySelectorAll('.session-row').length === 2`)
	for _, id := range []string{working, idle} {
		waitJS(t, ctx, "the mark of "+id, fmt.Sprintf(`!!document.querySelector('li[data-session=%q] .chip.gone')`, id))
		if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('li[data-session=%q] .chip.gone')?.textContent || ''`, id)); !strings.Contains(strings.ToLower(got), "offline") {
			t.Errorf("the list does not mark the session without its machine (%q)", eval[string](t, ctx, fmt.Sprintf(`document.querySelector('li[data-session=%q]').innerText`, id)))
		}
	}
	screenshot(t, ctx, "thumb-list")
}

// With the on-screen keyboard open (the composer focused, 390×460 CSS px
// left), a permission card keeps Deny and Allow on screen, above the
// prompt box and not under anything: its body (the command, the other
// ways to answer) scrolls inside it, with a cue that there is more, gone
// once scrolled to its end.
func TestAppPermissionAboveKeyboard(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	var cmd strings.Builder
	for i := range 12 {
		fmt.Fprintf(&cmd, "echo step %d of the build && make target-%d\n", i, i)
	}
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": cmd.String(), "description": "Build every target"}, "forSession": []string{"Bash(make:*)"}}}})
	ctx := newBrowser(t)
	must(t, ctx, phoneThumb())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the request", `!!document.querySelector('.perm[data-request="req-1"]')`)
	must(t, ctx, chromedp.Focus(chromedp.CSS(".composer textarea")))
	// The keyboard opens: 460 px of the screen are left.
	must(t, ctx, chromedp.EmulateViewport(390, 460, chromedp.EmulateScale(3), chromedp.EmulateMobile, chromedp.EmulateTouch))
	waitJS(t, ctx, "the smaller screen", `visualViewport.height <= 461 && document.activeElement === document.querySelector('.composer textarea')`)
	// The buttons a person answers with: inside the visible height, above
	// the prompt box, each hit where it is drawn.
	const onScreen = `(() => {
		const vh = visualViewport.height, composer = document.querySelector('.composer').getBoundingClientRect();
		const out = [];
		for (const sel of ['.perm .perm-actions .deny', '.perm .perm-actions .allow']) {
			const b = document.querySelector(sel);
			if (!b) { out.push(sel + ': missing'); continue; }
			const r = b.getBoundingClientRect(), x = r.left + r.width / 2, y = r.top + r.height / 2;
			const e = document.elementFromPoint(x, y);
			if (r.height < 40 || r.top < 0 || r.bottom > vh || r.bottom > composer.top + 0.5 || !e || !b.contains(e))
				out.push(sel + ' at ' + Math.round(r.top) + '–' + Math.round(r.bottom) + ' px (screen ' + Math.round(vh) + ', prompt box at ' + Math.round(composer.top) + ', hit ' + (e ? e.className || e.tagName : 'nothing') + ')');
		}
		return out.join('; ');
	})()`
	deadline := time.Now().Add(waitLimit)
	for {
		bad := eval[string](t, ctx, onScreen)
		if bad == "" {
			break
		}
		if time.Now().After(deadline) {
			screenshot(t, ctx, "thumb-perm-keyboard")
			t.Fatalf("with the keyboard open, the answers are not on screen: %s", bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The body scrolls, and says so until its end.
	body := `document.querySelector('.perm .perm-body')`
	if !eval[bool](t, ctx, `(() => { const b = `+body+`; return !!b && b.scrollHeight > b.clientHeight + 20 })()`) {
		t.Fatalf("the card's body does not scroll inside it")
	}
	cue := `getComputedStyle(` + body + `).maskImage !== 'none' && document.querySelector('.perm').dataset.more === 'true'`
	waitJS(t, ctx, "the cue that there is more", cue)
	screenshot(t, ctx, "thumb-perm-keyboard")
	eval[bool](t, ctx, `(() => { const b = `+body+`; b.scrollTop = b.scrollHeight; return true })()`)
	waitJS(t, ctx, "the cue gone at the end", `!(`+cue+`)`)
	if bad := eval[string](t, ctx, onScreen); bad != "" {
		t.Errorf("scrolled to its end, the answers are not on screen: %s", bad)
	}
	// Answering still works from there.
	click(t, ctx, ".perm .perm-actions .allow")
	if c := cli.command(protocol.StatusDone, ""); c.Kind != protocol.CommandPermission || c.RequestID != "req-1" || !c.Allow {
		t.Fatalf("the answer: %+v", c)
	}
}
