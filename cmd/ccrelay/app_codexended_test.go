package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// A Codex session that cannot go on (a new thread killed before Codex
// wrote it: the next ccrelay for it announces it ended, naming the thread
// that took its place, goneThreadState) says so in the list, the top bar
// and the prompt box, which takes nothing, and links the new thread; once
// that ccrelay stopped too, the note says it cannot go on and names the
// new thread, never how to resume it. A Codex session whose ccrelay
// stopped and that can go on keeps the command that resumes it.
func TestAppCodexSessionThatCannotGoOn(t *testing.T) {
	r := &appRelay{data: t.TempDir()}
	r.cmd, r.base, r.token = startServe(t, r.data, "--cli-gone-after", "1s")
	t.Cleanup(func() { r.cmd.Process.Signal(syscall.SIGTERM); r.cmd.Wait() })
	const (
		gone      = "019ac0de-0000-7000-8000-000000000001" // the thread Codex never wrote
		next      = "019ac0de-0000-7000-8000-000000000002" // the thread that took its place
		resumable = "019ac0de-0000-7000-8000-000000000003" // a thread whose ccrelay stopped
	)
	announce := func(cli *fakeCLI, session string, st launcher.SessionState) {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(agentSessionInfo("/home/dev/p", st, protocol.AgentCodex, "0.169.0", "", ""), &m); err != nil {
			t.Fatal(err)
		}
		cli.announce(session, m)
	}
	// The ccrelay that started the new thread holds both sessions.
	cli := dialCLI(t, r)
	cli.envelopes(gone, turn("g", "The first prompt, cut by the kill", "-")[:1]...)
	cli.envelopes(next, turn("n", "Go on", "Done.")...)
	announce(cli, gone, goneThreadState(gone, next))
	announce(cli, next, launcher.SessionState{Mode: "remote", Status: launcher.StatusIdle})
	other := dialCLI(t, r)
	other.envelopes(resumable, turn("r", "A thread that can go on", "Done.")...)
	announce(other, resumable, launcher.SessionState{Mode: "remote", Status: launcher.StatusIdle})

	ctx := newBrowser(t)
	must(t, ctx, phone390())
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	marks := `Object.fromEntries([...document.querySelectorAll('li.session-row')].map((li) => [li.dataset.session, li.querySelector('.chip.gone')?.textContent || '']))`
	waitJS(t, ctx, "the list, the ended session marked while its ccrelay runs", fmt.Sprintf(`(() => { const m = %s; return m[%q] === 'Cannot go on' && m[%q] === '' && m[%q] === '' })()`, marks, gone, next, resumable))

	// Its page, while a ccrelay holds it: it says why and where it goes on.
	page := func(when string) map[string]string {
		t.Helper()
		must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+gone))
		waitJS(t, ctx, "the ended session's page "+when, `(() => { const s = document.querySelector('.top-sub .status-text'); return !!s && s.textContent === 'Cannot go on' })()`)
		return eval[map[string]string](t, ctx, `(() => {
			const n = document.querySelector('.machine-note'), i = document.querySelector('.composer textarea'), a = document.querySelector('.composer-hint a.continued-link');
			return { hint: document.querySelector('.composer-hint').textContent, note: n && !n.hidden ? n.textContent : '',
				disabled: String(i.disabled), placeholder: i.placeholder, link: a ? a.getAttribute('href') : '' };
		})()`)
	}
	got := page("held")
	if !strings.Contains(got["hint"], next) || got["link"] != "#/s/"+next || got["disabled"] != "true" || strings.Contains(got["hint"], "resume") {
		t.Errorf("the ended session, held: %v; want a hint naming %s with a link to it, the prompt box disabled, no resume", got, next)
	}

	// Both ccrelays stop (a clean exit).
	cli.c.Close(websocket.StatusNormalClosure, "")
	other.c.Close(websocket.StatusNormalClosure, "")
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the marks once their ccrelays stopped", fmt.Sprintf(`(() => { const m = %s; return m[%q] === 'Cannot go on' && m[%q] === 'ccrelay stopped' && m[%q] === 'ccrelay stopped' })()`, marks, gone, next, resumable))
	got = page("stopped")
	waitJS(t, ctx, "the ended session's note", `(() => { const n = document.querySelector('.machine-note'); return !!n && !n.hidden && !!n.textContent })()`)
	note := eval[string](t, ctx, `document.querySelector('.machine-note').textContent`)
	if !strings.Contains(note, "cannot go on") || !strings.Contains(note, next) || strings.Contains(note, "resume") || strings.Contains(note, "until ccrelay runs it again") {
		t.Errorf("the ended session, its ccrelay stopped: note %q; want it to say it cannot go on, name %s, and offer no resume", note, next)
	}
	if got["disabled"] != "true" || got["link"] != "#/s/"+next {
		t.Errorf("the ended session, its ccrelay stopped: %v", got)
	}

	// The one that can go on: how to resume it.
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+resumable))
	waitJS(t, ctx, "the resumable session's note", `(() => { const n = document.querySelector('.machine-note'); return !!n && !n.hidden && n.textContent.startsWith('ccrelay stopped') })()`)
	if note := eval[string](t, ctx, `document.querySelector('.machine-note').textContent`); !strings.Contains(note, "(ccrelay codex resume with its id in its folder)") {
		t.Errorf("the resumable session, its ccrelay stopped: note %q", note)
	}
	if d := eval[bool](t, ctx, `document.querySelector('.composer textarea').disabled`); d {
		t.Error("the resumable session's prompt box is disabled")
	}
}
