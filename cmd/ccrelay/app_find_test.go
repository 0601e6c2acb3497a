package main

// Browser tests of finding and copying in the app: copy buttons
// (web/static/js/copy.js), the session list's search and filters
// (listfilter.js) and find-in-session (find.js).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// allowClipboard lets the page at origin read and write the clipboard
// (as a person who allowed it would) and keeps the page focused, which
// the clipboard API needs.
func allowClipboard(t *testing.T, ctx context.Context, origin string) {
	t.Helper()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name, AllowWithoutSanitization: true},
			Setting:    "granted", Origin: origin,
		}); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatal(err)
	}
}

// clipboard reads the clipboard's text.
func clipboard(t *testing.T, ctx context.Context) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("read the clipboard: %v", err)
	}
	return v
}

// clickCopy clears the clipboard (with window.clipboardWrite when the test
// replaced the page's own), clicks the copy button matched by sel
// and returns what the clipboard then holds, once the button says it
// copied.
func clickCopy(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.clipboardWrite || navigator.clipboard.writeText.bind(navigator.clipboard))('').then(() => true)`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	if !eval[bool](t, ctx, fmt.Sprintf(`(() => { const b = document.querySelector(%q); if (!b) return false; delete b.dataset.copied; b.scrollIntoView({ block: 'center' }); b.click(); return true })()`, sel)) {
		t.Fatalf("no copy button %s; page says:\n%s", sel, eval[string](t, ctx, `document.body.innerText.slice(0, 2000)`))
	}
	waitJS(t, ctx, "the copy of "+sel, fmt.Sprintf(`document.querySelector(%q).dataset.copied === 'yes'`, sel))
	return clipboard(t, ctx)
}

// findSession is a session whose text, commands and output the find and
// copy tests look for; earlier turns pad it past what the page renders at
// first.
func findSession(t *testing.T, cli *fakeCLI, id string, padding int) {
	t.Helper()
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	var envs []string
	for i := range padding {
		tag := fmt.Sprintf("pad%d", i)
		envs = append(envs,
			env("cu"+tag, t0, "user", "", textEv(fmt.Sprintf("question number %d", i))),
			env("cs"+tag, t0+1, "agent", "ct"+tag, `{"t":"turn-start"}`),
			env("ca"+tag, t0+2, "agent", "ct"+tag, textEv(fmt.Sprintf("answer number %d", i))),
			env("ce"+tag, t0+3, "agent", "ct"+tag, `{"t":"turn-end","status":"completed"}`))
		if i == 2 {
			// An early turn holding the needle, in a reply and in a
			// command's output.
			envs = append(envs,
				env("cuneedle", t0+4, "user", "", textEv("where is the zebrafish config?")),
				env("csneedle", t0+5, "agent", "ctneedle", `{"t":"turn-start"}`),
				env("caneedle", t0+6, "agent", "ctneedle", textEv("The **zebrafish** settings live in `conf/zebrafish.toml`.")),
				toolStartAt("cbneedle", t0+7, "ctneedle", "toolu_needle", "Bash", map[string]any{"command": "grep -rn zebrafish conf", "description": "Find it"}),
				env("cdneedle", t0+8, "agent", "ctneedle", `{"t":"tool-call-end","call":"toolu_needle","result":"conf/zebrafish.toml:1:[zebrafish]"}`),
				env("ceneedle", t0+9, "agent", "ctneedle", `{"t":"turn-end","status":"completed"}`))
		}
	}
	envs = append(envs,
		env("culast", t0+10, "user", "", textEv("show me the build command")),
		env("cslast", t0+11, "agent", "ctlast", `{"t":"turn-start"}`),
		env("calast", t0+12, "agent", "ctlast", textEv("Build it with:\n\n```sh\ngo build -o bin/app ./cmd/app\n```\n\nThen run **bin/app**.")),
		toolStartAt("cblast", t0+13, "ctlast", "toolu_last", "Bash", map[string]any{"command": "go test ./...", "description": "Run the tests"}),
		env("cdlast", t0+14, "agent", "ctlast", `{"t":"tool-call-end","call":"toolu_last","result":"\u001b[32mok\u001b[0m  \tgithub.com/x/app\t0.01s"}`),
		env("cclast", t0+15, "agent", "ctlast", textEv("All tests pass.")),
		env("celast", t0+16, "agent", "ctlast", `{"t":"turn-end","status":"completed"}`))
	for len(envs) > 0 {
		n := min(len(envs), 200)
		cli.envelopes(id, envs[:n]...)
		envs = envs[n:]
	}
}

// toolStartAt is the tool-call-start envelope of call, at time ms.
func toolStartAt(id string, ms int64, turn, call, name string, args map[string]any) string {
	a, _ := json.Marshal(args)
	return env(id, ms, "agent", turn, fmt.Sprintf(`{"t":"tool-call-start","call":%q,"name":%q,"title":"%s call","description":"%s call","args":%s}`, call, name, name, name, a))
}

// Copy buttons copy what they sit on, as text: a code block its code, a
// command the command (without the prompt sign), a command's output
// without its colour codes, a prompt its text and a turn's footer the
// reply as written (Markdown); when the clipboard API refuses, the button
// copies the old way (execCommand) and still says so.
func TestAppCopies(t *testing.T) {
	r := startAppRelay(t)
	const id = "0c0c0c0c-2222-4222-8333-444444444444"
	cli := dialCLI(t, r)
	findSession(t, cli, id, 0)
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	allowClipboard(t, ctx, r.base)
	r.open(t, ctx, id)
	showAll(t, ctx)
	eval[bool](t, ctx, `(() => { for (const d of document.querySelectorAll('details.tool')) d.open = true; return true })()`)
	waitJS(t, ctx, "the command's body", `!!document.querySelector('details.tool[data-call="toolu_last"] .tool-body')`)

	for _, c := range []struct{ sel, want string }{
		{`.turn .md .copyable .copy-btn`, "go build -o bin/app ./cmd/app"},
		{`details.tool[data-call="toolu_last"] .copyable:has(pre.cmd) .copy-btn`, "go test ./..."},
		{`details.tool[data-call="toolu_last"] .copyable:has(pre.term) .copy-btn`, "ok  \tgithub.com/x/app\t0.01s"},
		{`.msg.user[data-id="culast"] .copy-btn`, "show me the build command"},
		{`.turn[data-turn="ctlast"] .turn-end .copy-btn`, "Build it with:\n\n```sh\ngo build -o bin/app ./cmd/app\n```\n\nThen run **bin/app**.\n\nAll tests pass."},
	} {
		if got := clickCopy(t, ctx, c.sel); got != c.want {
			t.Errorf("%s copied %q, want %q", c.sel, got, c.want)
		}
	}
	if n := eval[int](t, ctx, `[...document.querySelectorAll('.copy-btn')].filter((b) => !b.getAttribute('aria-label')).length`); n != 0 {
		t.Errorf("%d copy buttons without a label", n)
	}
	screenshot(t, ctx, "copy-phone")

	// The clipboard API refuses: the old way copies.
	eval[bool](t, ctx, `(() => { window.clipboardWrite = navigator.clipboard.writeText.bind(navigator.clipboard); navigator.clipboard.writeText = () => Promise.reject(new DOMException('refused', 'NotAllowedError')); return true })()`)
	if got := clickCopy(t, ctx, `.msg.user[data-id="culast"] .copy-btn`); got != "show me the build command" {
		t.Errorf("the fallback copied %q", got)
	}
}

// rows are the titles of the sessions the list shows, in order.
func rows(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll('.session-row .row-title')].map((e) => e.textContent)`)
}

// waitRows waits until the list shows the sessions titled want (in any
// order: sessions updated in the same millisecond may swap).
func waitRows(t *testing.T, ctx context.Context, what string, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	b, _ := json.Marshal(want)
	deadline := time.Now().Add(waitLimit)
	for !eval[bool](t, ctx, fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('.session-row .row-title')].map((e) => e.textContent).sort()) === %q`, b)) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the list shows %q, want %q", what, rows(t, ctx), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The session list finds sessions by words of their first prompt, folder
// or machine (every word must match), and filters them by state (waiting
// for me, working, finished: each with its count), machine and folder;
// when nothing matches it says so and offers to show all; the choice stays
// when a session is opened and the list shown again.
func TestAppListSearchAndFilters(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	sessions := []struct {
		id, prompt string
		info       map[string]any
	}{
		{"0c0c0c0c-0001-4222-8333-444444444444", "tidy the docs", nil}, // a recording: no machine announced it
		{"0c0c0c0c-0002-4222-8333-444444444444", "add a login page", map[string]any{"cwd": "/home/dev/beta", "machine": "laptop", "mode": "local", "status": "idle"}},
		{"0c0c0c0c-0003-4222-8333-444444444444", "write release notes", map[string]any{"cwd": "/home/dev/beta", "machine": "desktop", "mode": "remote", "status": "busy"}},
		{"0c0c0c0c-0004-4222-8333-444444444444", "fix the login bug", map[string]any{"cwd": "/home/dev/alpha", "machine": "laptop", "mode": "remote", "status": "waiting-for-permission",
			"permissions": []map[string]any{{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "make"}}}}},
	}
	for i, s := range sessions {
		cli.envelopes(s.id, env(fmt.Sprintf("cp%d", i), t0+int64(i)*1000, "user", "", textEv(s.prompt)))
		if s.info != nil {
			cli.announce(s.id, s.info)
		}
	}
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	all := []string{"fix the login bug", "write release notes", "add a login page", "tidy the docs"}
	waitRows(t, ctx, "every session", all...)
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll('.filter-chip')].map((b) => b.textContent + ':' + b.getAttribute('aria-pressed'))`); !slices.Equal(got, []string{"All4:true", "Waiting for me1:false", "Working1:false", "Finished2:false"}) {
		t.Errorf("state chips %q", got)
	}

	search := func(q string) {
		t.Helper()
		eval[bool](t, ctx, fmt.Sprintf(`(() => { const i = document.querySelector('input[aria-label="Search sessions"]'); i.value = %q; i.dispatchEvent(new Event('input')); return true })()`, q))
	}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"login", []string{"fix the login bug", "add a login page"}},  // the prompt
		{"BETA", []string{"write release notes", "add a login page"}}, // the folder, any case
		{"desktop", []string{"write release notes"}},                  // the machine
		{"login  beta", []string{"add a login page"}},                 // every word
		{"~/alpha", []string{"fix the login bug"}},                    // the folder as shown
		{"", all},
	} {
		search(c.q)
		waitRows(t, ctx, "search "+c.q, c.want...)
	}

	state := func(s string) {
		t.Helper()
		click(t, ctx, fmt.Sprintf(`.filter-chip[data-state=%q]`, s))
	}
	state("waiting")
	waitRows(t, ctx, "waiting for me", "fix the login bug")
	state("working")
	waitRows(t, ctx, "working", "write release notes")
	state("finished")
	waitRows(t, ctx, "finished", "add a login page", "tidy the docs")
	state("")
	waitRows(t, ctx, "all states", all...)

	pick(t, ctx, "Machine", "laptop")
	waitRows(t, ctx, "on the laptop", "fix the login bug", "add a login page")
	pick(t, ctx, "Folder", "/home/dev/beta")
	waitRows(t, ctx, "on the laptop in beta", "add a login page")
	screenshot(t, ctx, "list-filters-phone")

	// The choice stays across a visit to a session.
	click(t, ctx, `.session-row a`)
	waitJS(t, ctx, "the session", `document.body.dataset.rendered === "0c0c0c0c-0002-4222-8333-444444444444"`)
	click(t, ctx, `a.back`)
	waitRows(t, ctx, "back on the list", "add a login page")

	search("release")
	waitJS(t, ctx, "nothing matches", `document.querySelector('.sessions .empty-title')?.textContent === 'No session matches'`)
	click(t, ctx, `.sessions .empty button`)
	waitRows(t, ctx, "filters cleared", all...)
	if got := eval[string](t, ctx, `document.querySelector('input[aria-label="Search sessions"]').value + '|' + document.querySelector('select[aria-label="Machine"]').value`); got != "|" {
		t.Errorf("after clearing: %q", got)
	}
}

// Find in a session searches the whole session, rendered or not: a turn
// far above what the page rendered holds the word in its prompt, its reply
// and a command's input and output (six matches, any case). The newest
// match comes first; going to a match renders its turn, opens the card it
// is in, highlights the word there and marks the current one; previous
// and next walk the matches in order and wrap; closing takes the
// highlights out and leaves the text as it was.
func TestAppFindInSession(t *testing.T) {
	r := startAppRelay(t)
	const id = "0c0c0c0c-3333-4222-8333-444444444444"
	cli := dialCLI(t, r)
	findSession(t, cli, id, 80)
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	if eval[bool](t, ctx, `!!document.querySelector('[data-turn="ctneedle"]')`) {
		t.Fatal("the turn with the word is rendered from the start: the test needs it not to be")
	}
	reply := "The zebrafish settings live in conf/zebrafish.toml."

	click(t, ctx, `button[aria-label="Find in session"]`)
	waitJS(t, ctx, "the find bar focused", `document.activeElement === document.querySelector('input[aria-label="Find in session"]')`)
	must(t, ctx, typeInto(`input[aria-label="Find in session"]`, "ZebraFish"))
	// where says where the current match is: count, then the unit holding it.
	where := func() string {
		return eval[string](t, ctx, `(() => {
			const cur = document.querySelector('mark.find-hit.current');
			const unit = cur?.closest('details.tool, .text, .msg.user');
			const kind = !unit ? 'none' : unit.matches('details.tool') ? 'tool:' + unit.open : unit.matches('.text') ? 'reply' : 'prompt';
			return document.querySelector('.find-count').textContent + '|' + kind + '|' + (cur?.textContent || '');
		})()`)
	}
	waitJS(t, ctx, "the newest match", `document.querySelector('.find-count').textContent === '6 of 6'`)
	for _, want := range []string{"6 of 6|tool:true|zebrafish", "5 of 6|tool:true|zebrafish", "4 of 6|tool:true|zebrafish", "3 of 6|reply|zebrafish", "2 of 6|reply|zebrafish", "1 of 6|prompt|zebrafish", "6 of 6|tool:true|zebrafish"} {
		if got := where(); got != want {
			t.Errorf("find shows %q, want %q", got, want)
		}
		click(t, ctx, `button[aria-label="Previous match"]`)
	}
	click(t, ctx, `button[aria-label="Next match"]`)
	if got := where(); got != "6 of 6|tool:true|zebrafish" {
		t.Errorf("next from 5 shows %q", got)
	}
	click(t, ctx, `button[aria-label="Next match"]`)
	if got := where(); got != "1 of 6|prompt|zebrafish" {
		t.Errorf("next from the last shows %q", got)
	}
	// The current match is on the screen, below the bars.
	if !eval[bool](t, ctx, `(() => { const r = document.querySelector('mark.find-hit.current').getBoundingClientRect(); return r.top > 56 && r.bottom < innerHeight })()`) {
		t.Error("the current match is off the screen")
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-turn="ctneedle"] mark.find-hit').length`); n < 5 {
		t.Errorf("%d matches highlighted in the turn, want at least 5", n)
	}
	screenshot(t, ctx, "find-phone")

	// Enter goes to the previous match; no match says so.
	must(t, ctx, typeInto(`input[aria-label="Find in session"]`, "\r"))
	if got := where(); got != "6 of 6|tool:true|zebrafish" {
		t.Errorf("enter from the first shows %q", got)
	}
	eval[bool](t, ctx, `(() => { const i = document.querySelector('input[aria-label="Find in session"]'); i.value = 'quagga'; i.dispatchEvent(new Event('input')); return true })()`)
	if got := where(); got != "No matches|none|" {
		t.Errorf("a word not in the session shows %q", got)
	}
	eval[bool](t, ctx, `(() => { const i = document.querySelector('input[aria-label="Find in session"]'); i.value = 'answer number 1'; i.dispatchEvent(new Event('input')); return true })()`)
	if got := where(); got != "11 of 11|reply|answer number 1" {
		t.Errorf("another word shows %q", got)
	}

	// Escape closes: no highlight left, the text as it was.
	must(t, ctx, typeInto(`input[aria-label="Find in session"]`, "\x1b"))
	waitJS(t, ctx, "the find bar closed", `document.querySelector('.find-bar').hidden`)
	if got := eval[string](t, ctx, `document.querySelectorAll('mark.find-hit').length + '|' + document.querySelector('[data-turn="ctneedle"] .text').textContent`); got != "0|"+reply {
		t.Errorf("after closing: %q", got)
	}
}

// The bounds of finding: a search counts at most MAX_MATCHES matches
// (and says "1 of 1000+"), highlights at most MAX_MARKS, and keeps
// MAX_FIND characters; the list's search keeps MAX_QUERY; a copy button
// says whether it copied for COPIED_MS, then shows its icon again.
func TestAppFindLimits(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the app", `!!document.querySelector('.top')`)
	type limits struct {
		Max, Found, MaxMarks, Marks int
		Count                       string
		MaxFind, FindLen            int
		MaxQuery, QueryLen          int
		CutMatches                  bool
		CopiedMS                    int
		Copied, After               string
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[limits](`(async () => {
		const f = await import('/js/find.js');
		const l = await import('/js/listfilter.js');
		const c = await import('/js/copy.js');
		const text = 'ab '.repeat(f.MAX_MATCHES + 5);
		const model = { blocks: [{ kind: 'user', env: { ev: { t: 'text', text } } }], envelopes: 1 };
		const root = document.createElement('div');
		root.textContent = text;
		document.body.append(root);
		const bar = f.findBar(() => ({ model, view: { reveal: () => root }, root }));
		document.body.append(bar.el);
		bar.open();
		const input = bar.el.querySelector('input');
		input.value = 'ab';
		input.dispatchEvent(new Event('input'));
		const lf = l.listFilter(() => {});
		const q = lf.el.querySelector('input');
		q.value = 'x'.repeat(l.MAX_QUERY) + 'y';
		q.dispatchEvent(new Event('input'));
		const s = { id: 's', info: {}, prompt: 'x'.repeat(l.MAX_QUERY) };
		const cutMatches = lf.filter([s]).length === 1;
		q.value = '';
		q.dispatchEvent(new Event('input'));
		const b = c.copyButton('Copy it', 'x');
		document.body.append(b);
		const t0 = performance.now();
		b.click();
		while (!b.dataset.copied) await new Promise((r) => setTimeout(r, 5));
		const copied = b.dataset.copied;
		while (b.dataset.copied) await new Promise((r) => setTimeout(r, 20));
		return { max: f.MAX_MATCHES, found: f.findMatches(model, 'ab').length, maxMarks: f.MAX_MARKS, marks: root.querySelectorAll('mark.find-hit').length,
			count: bar.el.querySelector('.find-count').textContent, maxFind: f.MAX_FIND, findLen: input.maxLength,
			maxQuery: l.MAX_QUERY, queryLen: q.maxLength, cutMatches, copiedMS: c.COPIED_MS, copied: copied ? 'said' : '', after: String(Math.round(performance.now() - t0) >= c.COPIED_MS) };
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := limits{Max: 1000, Found: 1000, MaxMarks: 300, Marks: 300, Count: "1000 of 1000+", MaxFind: 200, FindLen: 200, MaxQuery: 200, QueryLen: 200, CutMatches: true, CopiedMS: 1500, Copied: "said", After: "true"}
	if v != want {
		t.Errorf("limits\n got %+v\nwant %+v", v, want)
	}
}
