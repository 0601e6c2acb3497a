package main

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/claude"
)

// The app shows which agent each session runs, and its model, in the list
// and in the session's header: a Codex session as "Codex · gpt-5.5", a
// session of an older ccrelay (no agent in its info) as Claude's, and the
// composer asks for a message to the session's agent.
func TestAppShowsAgent(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	codex, old, claudeS := claude.NewSessionID(), claude.NewSessionID(), claude.NewSessionID()
	cli.announce(codex, map[string]any{"cwd": "/home/dev/greet", "machine": "laptop", "mode": "local", "status": "idle",
		"agent": "codex", "agentVersion": "0.169.0", "model": "gpt-5.5"})
	cli.announce(old, map[string]any{"cwd": "/home/dev/other", "machine": "laptop", "mode": "local", "status": "idle", "model": "opus"})
	cli.announce(claudeS, map[string]any{"cwd": "/home/dev/third", "machine": "laptop", "mode": "local", "status": "idle",
		"agent": "claude", "agentVersion": "2.1.330"})
	cli.envelopes(codex, turn("c1", "Say hi", "hi there")...)
	cli.envelopes(old, turn("o1", "Run the tests", "All pass.")...)
	cli.envelopes(claudeS, turn("n1", "List files", "Two.")...)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "three sessions", `document.querySelectorAll('li.session-row').length === 3`)
	row := func(id string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector('li[data-session=%q] .row-meta .agent')?.textContent || ''`, id))
	}
	for id, want := range map[string]string{codex: "Codex · gpt-5.5", old: "Claude · opus", claudeS: "Claude"} {
		if got := row(id); got != want {
			t.Errorf("row of %s shows %q, want %q", id, got, want)
		}
	}
	if title := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('li[data-session=%q] .row-meta .agent').title`, codex)); title != "Runs Codex CLI 0.169.0, model gpt-5.5" {
		t.Errorf("title %q", title)
	}
	screenshot(t, ctx, "agent-list")
	must(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/s/%s'`, codex)))
	waitJS(t, ctx, "the Codex session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, codex))
	waitJS(t, ctx, "the header names Codex and its model", `(document.querySelector('.top-sub .agent')?.textContent || '') === ' · Codex · gpt-5.5' &&
		document.querySelector('textarea[aria-label=Prompt]').placeholder === 'Message Codex…'`)
	checkAccessible(t, ctx, "a Codex session's page")
	must(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/s/%s'`, old)))
	waitJS(t, ctx, "the older session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, old))
	waitJS(t, ctx, "the header names Claude", `(document.querySelector('.top-sub .agent')?.textContent || '') === ' · Claude · opus' &&
		document.querySelector('textarea[aria-label=Prompt]').placeholder === 'Message Claude…'`)
}
