package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The New session sheet, on a phone, against `ccrelay daemon` on fake
// Claude: the machine is not listed as a session; + opens the sheet with
// the machine, its folders (searchable) and no bypassPermissions (not
// allowed); a folder outside the allowed ones, typed, is refused in the
// sheet with the daemon's reason; a new session starts with its first
// prompt and opens at once, answered; Stop in its settings ends it;
// Resume lists the folder's past session with its first prompt and
// continues it. The sheet passes axe-core's rules.
func TestAppNewSessionSheet(t *testing.T) {
	r := newDaemonRig(t)
	past := r.pastSession("the refactor from yesterday")
	other := filepath.Join(r.root, "other")
	os.MkdirAll(other, 0o700)
	r.startDaemon()

	ctx := newBrowser(t)
	must(t, ctx, phone(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the New session button", `!!document.querySelector('.new-session-btn') && !document.querySelector('.new-session-btn').hidden`)
	if n := eval[int](t, ctx, `document.querySelectorAll('li.session-row').length`); n != 0 {
		t.Fatalf("%d session rows: the machine is listed as a session", n)
	}
	click(t, ctx, `.new-session-btn`)
	waitJS(t, ctx, "the sheet with the project folder", fmt.Sprintf(`!!document.querySelector('dialog[open] .folder-list li[data-dir=%q]')`, r.project))
	modes := eval[string](t, ctx, `[...document.querySelectorAll('dialog[open] select[aria-label="Permission mode"] option')].map(o => o.value).join(',')`)
	if strings.Contains(modes, "bypassPermissions") || !strings.Contains(modes, "plan") {
		t.Fatalf("permission modes offered: %s", modes)
	}
	if got := eval[string](t, ctx, `document.querySelector('dialog[open] .machine-name')?.textContent || ''`); got == "" {
		t.Fatal("the sheet names no machine")
	}
	// Search narrows the folders.
	must(t, ctx, typeInto(`dialog[open] input[type=search]`, "zzz-nothing"))
	waitJS(t, ctx, "no folder matches", `!document.querySelector('dialog[open] .folder-list li[data-dir]')`)
	must(t, ctx, setValue(`dialog[open] input[type=search]`, ""))

	script := axeScript(t)
	if v := runAxe(t, ctx, script); len(v) > 0 {
		b, _ := json.MarshalIndent(v, "", "  ")
		t.Fatalf("the New session sheet breaks axe-core rules:\n%s", b)
	}

	// A folder outside the allowed ones, typed: refused, in the sheet.
	outside := t.TempDir()
	must(t, ctx, typeInto(`dialog[open] input[aria-label="Another folder"]`, outside),
		typeInto(`dialog[open] textarea[aria-label="First prompt"]`, "hello from the phone"),
		chromedp.Click(chromedp.CSS(`dialog[open] .tab-body button.primary`)))
	waitJS(t, ctx, "the refusal in the sheet", `(() => { const e = document.querySelector('dialog[open] .sheet-error'); return !!e && !e.hidden && e.textContent.includes('outside the folders this machine allows'); })()`)
	screenshot(t, ctx, "new-session-refused")

	// The project folder: started, opened, answered.
	must(t, ctx, setValue(`dialog[open] input[aria-label="Another folder"]`, ""),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`dialog[open] .folder-list li[data-dir=%q]`, r.project))))
	waitJS(t, ctx, "the folder picked", `document.querySelector('dialog[open] .folder-list li.selected') !== null`)
	must(t, ctx, setValue(`dialog[open] select[aria-label="Permission mode"]`, "plan"))
	screenshot(t, ctx, "new-session-sheet")
	click(t, ctx, `dialog[open] .tab-body button.primary`)
	waitJS(t, ctx, "the new session open", `location.hash.startsWith('#/s/') && !!document.body.dataset.rendered`)
	id := strings.TrimPrefix(eval[string](t, ctx, `decodeURIComponent(location.hash)`), "#/s/")
	waitJS(t, ctx, "the answer", `document.body.innerText.includes('hello from the phone') && document.body.innerText.includes('hello from claude')`)
	if b, _ := os.ReadFile(r.arglog); !strings.Contains(string(b), `"--session-id=`+id+`"`) || !strings.Contains(string(b), `"--permission-mode=plan"`) {
		t.Fatalf("Claude's arguments for %s:\n%s", id, b)
	}

	// Stop, from the session's settings.
	waitJS(t, ctx, "the machine says it runs the session", fmt.Sprintf(`(() => { const m = [...window.ccrelay.sessions.values()].find(s => s.info.mode === 'machine'); return !!m && m.info.daemon.running.has(%q); })()`, id))
	click(t, ctx, `button[aria-label="Session settings"]`)
	waitJS(t, ctx, "the Stop button", `!!document.querySelector('dialog[open] .stop-session')`)
	click(t, ctx, `dialog[open] .stop-session`)
	waitJS(t, ctx, "the session says it stopped", `document.body.innerText.includes('Stopped from the app')`)

	// Resume the past session.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the list", `!!document.querySelector('.new-session-btn') && !document.querySelector('.new-session-btn').hidden`)
	click(t, ctx, `.new-session-btn`)
	waitJS(t, ctx, "the sheet", fmt.Sprintf(`!!document.querySelector('dialog[open] .folder-list li[data-dir=%q]')`, r.project))
	must(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`dialog[open] .folder-list li[data-dir=%q]`, r.project))),
		chromedp.Click(chromedp.CSS(`dialog[open] .tabs button:nth-child(2)`)))
	waitJS(t, ctx, "the past session listed", fmt.Sprintf(`(() => { const li = document.querySelector('dialog[open] .past-sessions li[data-session=%q]'); return !!li && li.textContent.includes('the refactor from yesterday'); })()`, past))
	screenshot(t, ctx, "new-session-resume")
	click(t, ctx, fmt.Sprintf(`dialog[open] .past-sessions li[data-session=%q] button.resume`, past))
	waitJS(t, ctx, "the resumed session open", fmt.Sprintf(`decodeURIComponent(location.hash) === '#/s/' + %q`, past))
	if b, _ := os.ReadFile(r.arglog); strings.Contains(string(b), `"--resume=`+past+`"`) {
		t.Fatal("Claude resumed before any prompt")
	}
	must(t, ctx, typeInto(`textarea[aria-label="Prompt"]`, "carry on"), chromedp.Click(chromedp.CSS(`button[aria-label="Send"]`)))
	waitJS(t, ctx, "the resumed session answers", `document.body.innerText.includes('carry on') && document.body.innerText.includes('hello from claude')`)
	if b, _ := os.ReadFile(r.arglog); !strings.Contains(string(b), `"--resume=`+past+`"`) {
		t.Fatalf("Claude was not resumed:\n%s", b)
	}
}

// setValue sets an input's value as typing would (an input event follows).
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event('input', { bubbles: true })); e.dispatchEvent(new Event('change', { bubbles: true })); })()`, sel, v))
}
