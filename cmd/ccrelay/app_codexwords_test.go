package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/protocol"
)

// What the app says of a Codex session names Codex, not Claude: the
// composer, the context meter's count, the offline note, the hint in
// local mode (where Codex's terminal takes nothing from the app); and the
// deny-reason box of a request says that the text becomes a note in the
// session, which Codex does not read (docs/compatibility.md, "a denial's
// reason"), where a Claude Code session's says Claude reads it, and so
// does a Codex request that passes the reason on (reasonRead: Codex's
// older approvals).
func TestAppCodexWords(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	ctx := newBrowser(t)
	must(t, ctx, phone390())
	r.open(t, ctx, id)
	for _, c := range []struct {
		agent string
		// reasonRead: the request says Codex reads a denial's reason (its
		// older approvals).
		reasonRead bool

		link, placeholder, composer, count, offline, local, resume string
	}{
		{protocol.AgentCodex, false, "Deny with a note…", "Note for the session (Codex does not read it)", "Message Codex…", "(Codex's count)", "Codex's machine is offline",
			"This Codex session runs in its terminal, which takes nothing from the app: answer Codex there.", "(ccrelay codex resume with its id in its folder)"},
		{protocol.AgentCodex, true, "Deny with a reason…", "Tell Codex why, or what to do instead", "Message Codex…", "(Codex's count)", "Codex's machine is offline",
			"This Codex session runs in its terminal, which takes nothing from the app: answer Codex there.", "(ccrelay codex resume with its id in its folder)"},
		{protocol.AgentClaude, false, "Deny with a reason…", "Tell Claude why, or what to do instead", "Message Claude…", "(Claude's count)", "Claude's machine is offline",
			"Sending a message moves this session from the terminal to your phone.", "(ccrelay --resume in its folder)"},
	} {
		// A request of each session's own (a card is made once per request).
		req := fmt.Sprintf("req-%s-%v", c.agent, c.reasonRead)
		perm := map[string]any{"id": req, "tool": "Bash", "input": map[string]any{"command": "rm -rf build", "cwd": "/p", "description": ""}}
		if c.reasonRead {
			perm["reasonRead"] = true
		}
		cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "agent": c.agent, "permissions": []map[string]any{perm},
			"context": map[string]any{"usedTokens": 250000, "maxTokens": 1000000}})
		waitJS(t, ctx, c.agent+"'s request and meter", fmt.Sprintf(`(() => {
			const p = document.querySelector('.perm[data-request=%q]'), m = document.querySelector('.meter');
			return !!p && !!document.querySelector('.agent-%s') && !m.hidden && m.title.startsWith('Context in use: 250k / 1.0M');
		})()`, req, c.agent))
		if title := eval[string](t, ctx, `document.querySelector('.meter').title`); title != "Context in use: 250k / 1.0M "+c.count {
			t.Errorf("%s session's meter: %q", c.agent, title)
		}
		click(t, ctx, `.perm[data-request="`+req+`"] button.deny-why`)
		got := eval[map[string]string](t, ctx, fmt.Sprintf(`(() => {
			const p = document.querySelector('.perm[data-request=%q]'), r = p.querySelector('.perm-reason-text');
			return { link: p.querySelector('button.deny-why').textContent, placeholder: r.placeholder, label: r.getAttribute('aria-label'),
				shown: String(!p.querySelector('.perm-reason').hidden), composer: document.querySelector('.composer textarea').placeholder };
		})()`, req))
		if got["link"] != c.link || got["placeholder"] != c.placeholder || got["shown"] != "true" || got["composer"] != c.composer {
			t.Errorf("%s session: %v; want link %q, placeholder %q, composer %q", c.agent, got, c.link, c.placeholder, c.composer)
		}
		if c.agent == protocol.AgentCodex && !c.reasonRead && got["label"] == "Reason for denying" {
			t.Errorf("a Codex session's box is labelled %q", got["label"])
		}
		// In local mode: a Claude Code session is taken over by a prompt
		// from the app, a Codex session is not (its terminal takes nothing).
		cli.announce(id, map[string]any{"mode": "local", "status": "idle", "agent": c.agent})
		waitJS(t, ctx, c.agent+" in local mode", `!document.querySelector('.perm') && !!document.querySelector('.composer-hint').textContent`)
		if hint := eval[string](t, ctx, `document.querySelector('.composer-hint').textContent`); hint != c.local {
			t.Errorf("%s session in local mode: hint %q, want %q", c.agent, hint, c.local)
		}
		// What the app says when the session's machine is offline.
		note, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`import('/js/gone.js').then((g) => g.goneState({ mode: 'remote', cliGone: 1, agent: %q }).note)`, c.agent), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if len(note) < len(c.offline) || note[:len(c.offline)] != c.offline {
			t.Errorf("%s session offline: %q", c.agent, note)
		}
		// ... and when its ccrelay stopped: how to run it again.
		stopped, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`import('/js/gone.js').then((g) => g.goneState({ mode: 'local', cliGone: 1, cliStopped: true, agent: %q }).note)`, c.agent), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stopped, c.resume) {
			t.Errorf("%s session's ccrelay stopped: %q, want it to say %q", c.agent, stopped, c.resume)
		}
	}
}
