package main

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// A machine whose daemon has Claude Code and Codex offers both in the New
// session sheet: Claude's model and permission mode are gone once Codex is
// picked, and the start command says agent codex with neither; a machine
// with Claude Code alone offers no choice.
func TestAppNewSessionOffersCodex(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	machine, lone := claude.NewSessionID(), claude.NewSessionID()
	daemonInfo := func(name, codexVersion string) map[string]any {
		return map[string]any{"mode": "machine", "status": "idle", "machine": name, "title": name,
			"daemon": protocol.DaemonInfo{OS: "linux", ClaudeVersion: "2.1.330", CodexVersion: codexVersion,
				Folders: []protocol.DaemonFolder{{Dir: "/home/dev/app", At: 1}}}}
	}
	cli.announce(machine, daemonInfo("both-box", "0.169.0"))
	cli.announce(lone, daemonInfo("claude-box", ""))
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the New session button", `!!document.querySelector('.new-session-btn') && !document.querySelector('.new-session-btn').hidden`)
	click(t, ctx, `.new-session-btn`)
	waitJS(t, ctx, "the sheet", `!!document.querySelector('dialog[open] .folder-list li[data-dir="/home/dev/app"]')`)
	pickMachine := func(id string) {
		must(t, ctx, setValue(`dialog[open] select[aria-label="Machine"]`, id))
		waitJS(t, ctx, "the machine picked", fmt.Sprintf(`document.querySelector('dialog[open] select[aria-label="Machine"]').value === %q`, id))
	}
	pickMachine(lone)
	if eval[bool](t, ctx, `!!document.querySelector('dialog[open] select[aria-label="Agent"]')`) {
		t.Fatal("a machine without Codex offers an agent")
	}
	pickMachine(machine)
	waitJS(t, ctx, "the agent offered", `[...document.querySelectorAll('dialog[open] select[aria-label="Agent"] option')].map(o => o.value).join() === 'claude,codex' &&
		[...document.querySelectorAll('dialog[open] .meta')].some((e) => e.textContent.includes('Codex 0.169.0'))`)
	must(t, ctx, chromedp.Click(chromedp.CSS(`dialog[open] .folder-list li[data-dir="/home/dev/app"]`)),
		setValue(`dialog[open] select[aria-label="Agent"]`, "codex"))
	waitJS(t, ctx, "Claude's options gone", `!document.querySelector('dialog[open] select[aria-label="Model"]') && !document.querySelector('dialog[open] select[aria-label="Permission mode"]') &&
		document.querySelector('dialog[open] textarea[aria-label="First prompt"]').placeholder === 'What should Codex do?'`)
	checkAccessible(t, ctx, "the New session sheet with Codex")
	screenshot(t, ctx, "new-session-codex")
	must(t, ctx, typeInto(`dialog[open] textarea[aria-label="First prompt"]`, "say hi"),
		chromedp.Click(chromedp.CSS(`dialog[open] .tab-body button.primary`)))
	c := cli.command(protocol.StatusDone, "")
	if c.Kind != protocol.CommandStart || c.Agent != protocol.AgentCodex || c.Model != "" || c.Mode != "" || c.Text != "say hi" || c.Dir != "/home/dev/app" {
		t.Fatalf("start command %+v", c)
	}
}

// A new Codex session the app asked a machine for runs under the id Codex
// chose for its thread, not the id the start named: the daemon announces
// which thread its start's target runs as, and the app that asked lands on
// that thread; its Stop names the thread, which the daemon runs. A session
// that only claims the start (startedAs the target, startedBy the machine)
// is not opened, and gets no Stop of the target's session; nor is one
// that another machine's daemon says the start runs as.
func TestAppOpensStartedCodexThread(t *testing.T) {
	r := startAppRelay(t)
	cli := dialCLI(t, r)
	machine := claude.NewSessionID()
	daemonInfo := func(threads map[string]string, running ...string) map[string]any {
		return map[string]any{"mode": "machine", "status": "idle", "machine": "box", "title": "box",
			"daemon": protocol.DaemonInfo{OS: "linux", ClaudeVersion: "2.1.330", CodexVersion: "0.169.0",
				Folders: []protocol.DaemonFolder{{Dir: "/home/dev/app", At: 1}}, Running: running, Threads: threads}}
	}
	cli.announce(machine, daemonInfo(nil))
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the New session button", `!!document.querySelector('.new-session-btn') && !document.querySelector('.new-session-btn').hidden`)
	click(t, ctx, `.new-session-btn`)
	waitJS(t, ctx, "the sheet", `!!document.querySelector('dialog[open] .folder-list li[data-dir="/home/dev/app"]')`)
	must(t, ctx, chromedp.Click(chromedp.CSS(`dialog[open] .folder-list li[data-dir="/home/dev/app"]`)),
		setValue(`dialog[open] select[aria-label="Agent"]`, "codex"))
	waitJS(t, ctx, "Codex picked", `document.querySelector('dialog[open] textarea[aria-label="First prompt"]').placeholder === 'What should Codex do?'`)
	must(t, ctx, typeInto(`dialog[open] textarea[aria-label="First prompt"]`, "say hi"),
		chromedp.Click(chromedp.CSS(`dialog[open] .tab-body button.primary`)))
	c := cli.command(protocol.StatusDone, "")
	if c.Kind != protocol.CommandStart || c.Agent != protocol.AgentCodex || !protocol.IsSessionID(c.Target) {
		t.Fatalf("start command %+v", c)
	}
	// Another session claims the start before the thread is known: the
	// app does not take its word for it.
	impostor := claude.NewSessionID()
	cli.announce(machine, daemonInfo(nil, c.Target))
	cli.announce(impostor, map[string]any{"mode": "remote", "status": "idle", "agent": "codex", "agentVersion": "0.169.0",
		"machine": "box", "startedBy": machine, "startedAs": c.Target, "title": "not it"})
	waitJS(t, ctx, "the impostor listed", fmt.Sprintf(`!!document.querySelector('li[data-session=%q]')`, impostor))
	// Nor the word of another machine's daemon, which says the start runs
	// as the impostor: only the machine asked knows its start.
	other := claude.NewSessionID()
	cli.announce(other, map[string]any{"mode": "machine", "status": "idle", "machine": "other-box", "title": "other-box",
		"daemon": protocol.DaemonInfo{OS: "linux", CodexVersion: "0.169.0", Running: []string{c.Target, impostor}, Threads: map[string]string{c.Target: impostor}}})
	// A session announced after it is listed once the app has read it.
	marker := claude.NewSessionID()
	cli.announce(marker, map[string]any{"mode": "remote", "status": "idle", "agent": "codex", "machine": "other-box", "title": "marker"})
	waitJS(t, ctx, "the marker listed (or the impostor opened)", fmt.Sprintf(`!!document.querySelector('li[data-session=%q]') || decodeURIComponent(location.hash) === %q`, marker, "#/s/"+impostor))
	if got := eval[string](t, ctx, `decodeURIComponent(location.hash)`); got == "#/s/"+impostor {
		t.Fatal("the app opened the session another machine's daemon named for the start")
	}
	// Codex's thread id is another; the daemon says the target runs as it.
	thread := claude.NewSessionID()
	cli.announce(thread, map[string]any{"mode": "remote", "status": "idle", "agent": "codex", "agentVersion": "0.169.0",
		"machine": "box", "startedBy": machine, "startedAs": c.Target, "title": "say hi"})
	cli.announce(machine, daemonInfo(map[string]string{c.Target: thread}, c.Target, thread))
	waitJS(t, ctx, "the new thread open", fmt.Sprintf(`decodeURIComponent(location.hash) === %q && !!document.body.dataset.rendered`, "#/s/"+thread))

	click(t, ctx, `button[aria-label="Session settings"]`)
	waitJS(t, ctx, "the Stop button", `!!document.querySelector('dialog[open] .stop-session')`)
	click(t, ctx, `dialog[open] .stop-session`)
	if s := cli.command(protocol.StatusDone, ""); s.Kind != protocol.CommandStop || s.Target != thread {
		t.Fatalf("stop command %+v, want the thread %s", s, thread)
	}
	// The impostor's settings offer no Stop: it is none of the machine's.
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+impostor))
	waitJS(t, ctx, "the impostor open", fmt.Sprintf(`decodeURIComponent(location.hash) === %q && !!document.body.dataset.rendered`, "#/s/"+impostor))
	click(t, ctx, `button[aria-label="Session settings"]`)
	waitJS(t, ctx, "its settings", `!!document.querySelector('dialog[open] .sheet-title')`)
	if eval[bool](t, ctx, `!!document.querySelector('dialog[open] .stop-session')`) {
		t.Fatal("a session that claims a start it is not offers to stop the start's session")
	}
}
