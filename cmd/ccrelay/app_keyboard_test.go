package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// With the on-screen keyboard open (the visible height shrinks), the
// permission requests and the prompt box take at most half of what is
// visible; the requests scroll inside, and the conversation stays
// readable above.
func TestAppKeyboardHalfScreen(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	var perms []map[string]any
	for i := range 4 {
		perms = append(perms, map[string]any{"id": fmt.Sprintf("req-%d", i), "tool": "Bash",
			"input": map[string]any{"command": strings.Repeat(fmt.Sprintf("echo step %d && ", i), 20) + "true"}, "description": "A long command"})
	}
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": perms})
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the requests", `document.querySelectorAll('.perm').length === 4`)
	// A tall prompt (typed all at once: the input event grows the box).
	eval[bool](t, ctx, fmt.Sprintf(`(() => { const ta = document.querySelector('.composer textarea'); ta.value = %q; ta.dispatchEvent(new Event('input')); return true })()`, strings.Repeat("a long prompt line\n", 30)))

	if n := eval[int](t, ctx, `document.querySelector('.composer textarea').value.length`); n < 500 {
		t.Fatalf("the prompt box holds %d characters", n)
	}
	check := func(what string) {
		t.Helper()
		t.Logf("%s: %s", what, eval[string](t, ctx, `JSON.stringify({vh: visualViewport.height, vvh: getComputedStyle(document.documentElement).getPropertyValue('--vvh'), dock: document.querySelector('.dock').getBoundingClientRect().height, ta: document.querySelector('.composer textarea').getBoundingClientRect().height, taStyle: document.querySelector('.composer textarea').style.height, len: document.querySelector('.composer textarea').value.length})`))
		// The resize reaches the page through visualViewport's event.
		waitJS(t, ctx, what+": the dock within half the visible height", `(() => {
			const vh = visualViewport.height, dock = document.querySelector('.dock').getBoundingClientRect();
			const ta = document.querySelector('.composer textarea').getBoundingClientRect();
			return dock.height <= vh / 2 + 1 && ta.height <= vh / 4 + 1 && ta.height > 60 && dock.height > 80;
		})()`)
		if !eval[bool](t, ctx, `(() => { const p = document.querySelector('.perms'); return p.scrollHeight > p.clientHeight + 10; })()`) {
			t.Errorf("%s: the requests do not scroll inside the dock", what)
		}
	}
	check("keyboard closed")
	full := eval[float64](t, ctx, `visualViewport.height`)
	// The keyboard opens: the visible height drops to 400 px.
	must(t, ctx, chromedp.EmulateViewport(390, 400, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch))
	check("keyboard open")
	if h := eval[float64](t, ctx, `visualViewport.height`); h >= full {
		t.Fatalf("the visible height did not shrink: %v then %v", full, h)
	}
	screenshot(t, ctx, "keyboard-open")
}
