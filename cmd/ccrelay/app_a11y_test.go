package main

// Accessibility of the app, checked by axe-core in the browser: the
// session list and a session page, in the dark and the light theme.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// axeEnv names axe-core's axe.min.js (.ci/run installs it, pinned).
// Without it the test looks in the cache folder .ci/run installs into, and
// is skipped when it is not there either, except in CI (CI=true).
const axeEnv = "CCRELAY_TEST_AXE"

// axeScript returns the text of axe.min.js.
func axeScript(t *testing.T) string {
	t.Helper()
	p := os.Getenv(axeEnv)
	if p == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			if m, _ := filepath.Glob(filepath.Join(dir, "ccrelay-ci", "axe-core-*", "node_modules", "axe-core", "axe.min.js")); len(m) > 0 {
				p = m[len(m)-1]
			}
		}
	}
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no axe-core: CI must install it (.ci/run sets %s)", axeEnv)
		}
		t.Skipf("no axe-core (set %s to its axe.min.js)", axeEnv)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read axe-core: %v", err)
	}
	return string(b)
}

// axeViolation is one rule axe-core found broken, with where.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeTags are the rules checked: WCAG 2.1 A and AA, and axe's best
// practices (one main, one h1, content in landmarks, …).
var axeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"}

// runAxe injects axe-core into the page (through the DevTools protocol:
// the page's Content-Security-Policy stays as the app serves it) and
// returns what it finds.
func runAxe(t *testing.T, ctx context.Context, script string) []axeViolation {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](script)); err != nil {
		t.Fatalf("inject axe-core: %v", err)
	}
	tags, _ := json.Marshal(axeTags)
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](fmt.Sprintf(`axe.run(document, { runOnly: { type: 'tag', values: %s }, resultTypes: ['violations'] })
		.then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact || '', help: v.help,
			nodes: v.nodes.slice(0, 6).map((n) => n.target.join(' ') + ' — ' + (n.failureSummary || '').replace(/\s+/g, ' ').slice(0, 300)) })))`, tags), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe-core: %v", err)
	}
	return v
}

// theme makes the page's prefers-color-scheme dark or light.
func theme(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: name}}})
		return err
	})
}

// The session list and a session page pass axe-core's WCAG 2.1 AA rules and
// best practices in both themes: contrast of at least 4.5:1 for every text
// (each turn's status, tool states, chips, exit codes, notes), one h1,
// landmarks holding all content, every control labelled. The pages shown
// hold what the app draws: sessions in every state, the filters, turns
// completed, failed, cancelled and unfinished, tool cards open (a failed
// one too), code, a subagent, a permission request with its forms open,
// the find bar with highlights, the settings sheet.
func TestAppAccessible(t *testing.T) {
	script := axeScript(t)
	r := startAppRelay(t)
	id := seedEverything(t, r)
	// A machine's daemon, for the new-session sheet (not a row of the list).
	dialCLI(t, r).announce("0c0c0c0c-aaaa-4222-8333-444444444444", map[string]any{"mode": "machine", "status": "idle", "machine": "laptop", "title": "laptop",
		"daemon": map[string]any{"os": "linux", "arch": "amd64", "roots": []string{"/home/dev"}, "running": []string{},
			"folders": []map[string]any{{"dir": "/home/dev/project", "at": time.Now().UnixMilli()}}}})

	ctx := newBrowser(t)
	for _, th := range []string{"dark", "light"} {
		t.Run(th, func(t *testing.T) {
			must(t, ctx, phone390(), theme(th))
			check := func(page string) {
				t.Helper()
				for _, v := range runAxe(t, ctx, script) {
					t.Errorf("%s, %s theme: %s (%s, %s):\n  %s", page, th, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
				}
			}
			must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
			waitJS(t, ctx, "the list", `document.querySelectorAll('.session-row').length === 4`)
			check("the list")
			screenshot(t, ctx, "a11y-list-"+th)
			click(t, ctx, `.filter-chip[data-state="waiting"]`)
			waitJS(t, ctx, "the filtered list", `document.querySelectorAll('.session-row').length === 1`)
			check("the filtered list")
			click(t, ctx, `.filter-chip[data-state=""]`)
			// The sheets the list opens.
			click(t, ctx, `button[aria-label="Notifications"]`)
			waitJS(t, ctx, "the notifications sheet", `(() => { const d = document.querySelector('dialog.sheet[open] .notify-sheet'); return !!d && !d.querySelector('[role=status]').textContent.startsWith('Asking') })()`)
			check("the notifications sheet")
			click(t, ctx, `dialog.sheet[open] button[value="close"]`)
			waitJS(t, ctx, "the new-session button", `!document.querySelector('.new-session-btn').hidden && !document.querySelector('dialog.sheet[open]')`)
			click(t, ctx, `button.new-session-btn`)
			waitJS(t, ctx, "the new-session sheet", `!!document.querySelector('dialog.sheet[open] .new-session li.folder')`)
			check("the new-session sheet")
			click(t, ctx, `dialog.sheet[open] button[value="close"]`)
			waitJS(t, ctx, "the sheet closed", `!document.querySelector('dialog.sheet[open]')`)

			r.open(t, ctx, id)
			showAll(t, ctx)
			waitJS(t, ctx, "the request", `!!document.querySelector('.perm[data-request="req-1"]')`)
			eval[bool](t, ctx, `(() => { for (const d of document.querySelectorAll('details.tool, details.sub, details.thinking, details.mchip')) d.open = true;
				for (const b of document.querySelectorAll('.perm button.deny-why, .perm button.edit-first')) b.click(); return true })()`)
			waitJS(t, ctx, "the cards open", `[...document.querySelectorAll('details.tool')].every((d) => d.querySelector('.tool-body'))`)
			waitJS(t, ctx, "the task strip", `!document.querySelector('.task-strip').hidden`)
			click(t, ctx, ".task-strip > summary")
			check("a session")
			screenshot(t, ctx, "a11y-session-"+th)
			must(t, ctx, chromedp.Click(chromedp.CSS(`button[aria-label="Find in session"]`)), typeInto(`input[aria-label="Find in session"]`, "zebrafish"))
			waitJS(t, ctx, "highlights", `!!document.querySelector('mark.find-hit.current')`)
			check("a session with find")
			must(t, ctx, chromedp.Click(chromedp.CSS(`button[aria-label="Session settings"]`)), chromedp.WaitVisible(chromedp.CSS("dialog.sheet select")))
			check("the settings sheet")

			// Before pairing: a browser with no credential.
			fresh := newBrowser(t)
			must(t, fresh, phone390(), theme(th), chromedp.Navigate(r.base+"/"))
			waitJS(t, fresh, "the token page", `!!document.querySelector('.token-form input[aria-label="Token"]')`)
			for _, v := range runAxe(t, fresh, script) {
				t.Errorf("the token page, %s theme: %s (%s, %s):\n  %s", th, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
			}
			must(t, fresh, chromedp.Navigate("about:blank"), chromedp.Navigate(r.base+"/#pair=ABCD2345.abcdefgh"))
			waitJS(t, fresh, "the pairing page", `!!document.querySelector('.pair-page input.pair-name')`)
			for _, v := range runAxe(t, fresh, script) {
				t.Errorf("the pairing page, %s theme: %s (%s, %s):\n  %s", th, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
			}
		})
	}
}

// seedEverything gives the relay sessions showing what the app draws:
// sessions in every state (4 in the list), and one (the id returned) with
// turns completed, failed, cancelled and unfinished, a thinking block, a
// failed tool, a subagent, Markdown with a table and a link, the todo
// checklist, a permission request offering "for this session", and a
// link to the session it was forked from.
func seedEverything(t *testing.T, r *appRelay) string {
	t.Helper()
	cli := dialCLI(t, r)
	const id = "0c0c0c0c-4444-4222-8333-444444444444"
	findSession(t, cli, id, 3)
	t0 := time.Now().Add(-30 * time.Minute).UnixMilli()
	cli.envelopes(id,
		env("cuf", t0, "user", "", textEv("<command-name>/model</command-name>\n<command-args>opus</command-args>")),
		env("cuf2", t0+1, "user", "", textEv("try the risky thing")),
		env("csf", t0+2, "agent", "ctf", `{"t":"turn-start"}`),
		env("ctf1", t0+3, "agent", "ctf", `{"t":"text","text":"Thinking it over","thinking":true}`),
		toolStartAt("ctf2", t0+4, "ctf", "toolu_fail", "Bash", map[string]any{"command": "false", "description": "Fail"}),
		env("ctf3", t0+5, "agent", "ctf", `{"t":"tool-call-end","call":"toolu_fail","result":"Exit code 1\nno such thing","error":true}`),
		env("ctf4", t0+6, "agent", "ctf", `{"t":"service","text":"API error: overloaded, retrying"}`),
		env("csub1", t0+7, "agent", "ctf", `{"t":"start","title":"Explore the code"}`),
		env("cef", t0+9, "agent", "ctf", `{"t":"turn-end","status":"failed"}`),
		env("cuc", t0+10, "user", "", textEv("stop that")),
		env("csc", t0+11, "agent", "ctc", `{"t":"turn-start"}`),
		env("cec", t0+12, "agent", "ctc", `{"t":"turn-end","status":"cancelled"}`),
		env("cuo", t0+13, "user", "", textEv("and now?")),
		env("cso", t0+14, "agent", "cto", `{"t":"turn-start"}`),
		env("cao", t0+15, "agent", "cto", textEv("# The plan\n\n## Steps\n\n| a | b |\n|---|---|\n| 1 | [link](https://example.com) |\n\n> quoted\n\n- [x] done\n- [ ] to do\n\n### Details\n\nText `code`.")),
		toolStartAt("cto2", t0+16, "cto", "toolu_todo", "TodoWrite", map[string]any{"todos": []any{
			map[string]any{"content": "Read the code", "status": "completed", "activeForm": "Reading"},
			map[string]any{"content": "Fix it", "status": "in_progress", "activeForm": "Fixing it"},
			map[string]any{"content": "Test it", "status": "pending", "activeForm": "Testing"}}}),
	)
	// The subagent's own envelopes.
	sub := func(e string) string {
		return strings.Replace(e, `"turn":"ctf"`, `"turn":"ctf","subagent":"csubagent"`, 1)
	}
	cli.envelopes(id, sub(env("csub2", t0+7, "agent", "ctf", textEv("Looking around"))), sub(env("csub3", t0+8, "agent", "ctf", `{"t":"stop"}`)))
	cli.announce(id, map[string]any{"cwd": "/home/dev/project", "machine": "laptop", "mode": "remote", "status": "waiting-for-permission", "model": "opus", "forkedFrom": "0c0c0c0c-5551-4222-8333-444444444444",
		"usage":       map[string]any{"input_tokens": 50000, "context_window": 200000},
		"permissions": []map[string]any{{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "rm -rf build"}, "description": "Clean", "forSession": []string{"Bash(rm:*)"}}}})
	for i, st := range []string{"busy", "idle"} {
		other := fmt.Sprintf("0c0c0c0c-555%d-4222-8333-444444444444", i)
		cli.envelopes(other, env(fmt.Sprintf("co%d", i), t0, "user", "", textEv("another session "+st)))
		cli.announce(other, map[string]any{"cwd": "/home/dev/other", "machine": "desktop", "mode": "local", "status": st})
	}
	cli.envelopes("0c0c0c0c-6666-4222-8333-444444444444", env("crec", t0, "user", "", textEv("a recording")))
	return id
}
