package main

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// The New session sheet's Resume tab lists a folder's Codex threads beside
// its Claude Code sessions, each saying its agent; resuming a Codex thread
// sends a start with agent codex and the thread as target, resuming a
// Claude session one without an agent.
func TestAppResumesCodexThread(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	machine, thread, past := claude.NewSessionID(), "01a21dbb-ba37-70e1-be18-083f6b195744", claude.NewSessionID()
	cli.announce(machine, map[string]any{"mode": "machine", "status": "idle", "machine": "both-box", "title": "both-box",
		"daemon": protocol.DaemonInfo{OS: "linux", ClaudeVersion: "2.1.330", CodexVersion: "0.169.0",
			Folders: []protocol.DaemonFolder{{Dir: "/home/dev/app", At: 2, Sessions: []protocol.PastSession{
				{ID: thread, Prompt: "the Codex thread", At: 2, Agent: protocol.AgentCodex},
				{ID: past, Prompt: "the Claude session", At: 1},
			}}}}})
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the New session button", `!!document.querySelector('.new-session-btn') && !document.querySelector('.new-session-btn').hidden`)
	open := func() {
		click(t, ctx, `.new-session-btn`)
		waitJS(t, ctx, "the sheet", `!!document.querySelector('dialog[open] .folder-list li[data-dir="/home/dev/app"]')`)
		must(t, ctx, chromedp.Click(chromedp.CSS(`dialog[open] .folder-list li[data-dir="/home/dev/app"]`)),
			chromedp.Click(chromedp.CSS(`dialog[open] .tabs button:nth-child(2)`)))
		waitJS(t, ctx, "both past sessions listed, with their agent", fmt.Sprintf(`(() => {
			const li = (id) => document.querySelector('dialog[open] .past-sessions li[data-session="' + id + '"]');
			return !!li(%q) && li(%q).textContent.includes('the Codex thread') && li(%q).textContent.includes('Codex') &&
				!!li(%q) && li(%q).textContent.includes('the Claude session') && li(%q).textContent.includes('Claude Code'); })()`,
			thread, thread, thread, past, past, past))
	}
	open()
	checkAccessible(t, ctx, "the Resume tab with a Codex thread")
	screenshot(t, ctx, "new-session-resume-codex")
	click(t, ctx, fmt.Sprintf(`dialog[open] .past-sessions li[data-session=%q] button.resume`, thread))
	c := cli.command(protocol.StatusDone, "")
	if c.Kind != protocol.CommandStart || !c.Resume || c.Agent != protocol.AgentCodex || c.Target != thread || c.Dir != "/home/dev/app" || c.Text != "" {
		t.Fatalf("start command %+v", c)
	}

	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the list", `!!document.querySelector('.new-session-btn') && !document.querySelector('.new-session-btn').hidden`)
	open()
	click(t, ctx, fmt.Sprintf(`dialog[open] .past-sessions li[data-session=%q] button.resume`, past))
	c = cli.command(protocol.StatusDone, "")
	if c.Kind != protocol.CommandStart || !c.Resume || c.Agent != "" || c.Target != past {
		t.Fatalf("start command %+v", c)
	}
}
