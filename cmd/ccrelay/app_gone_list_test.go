package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// linkNames is the accessible name of each link in the page whose name
// holds one of titles (as a screen reader says it), by the title's key.
func linkNames(t *testing.T, ctx context.Context, titles map[string]string) map[string]string {
	t.Helper()
	res, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		t.Fatal(err)
	}
	str := func(v *accessibility.Value) string {
		var s string
		if v != nil {
			json.Unmarshal([]byte(v.Value), &s)
		}
		return s
	}
	out := map[string]string{}
	for _, n := range res.Nodes {
		if n.Ignored || str(n.Role) != "link" {
			continue
		}
		name := str(n.Name)
		for key, title := range titles {
			if strings.Contains(name, title) {
				out[key] = name
			}
		}
	}
	return out
}

// The list marks every session whose ccrelay is gone, working or idle,
// remote, local, followed or started by a machine's daemon: "Machine
// offline" where the connection was lost (the machine off or offline),
// "ccrelay stopped" where ccrelay closed it itself; in words beside an
// icon (not a colour alone), part of the row's accessible name. A session
// whose ccrelay is connected is not marked, and the mark goes when ccrelay
// comes back and announces itself. A session opened says what its row says
// (the top bar, the note).
func TestAppListMarksSessionsWithoutTheirCLI(t *testing.T) {
	r := &appRelay{data: t.TempDir()}
	r.cmd, r.base, r.token = startServe(t, r.data, "--cli-gone-after", "1s")
	t.Cleanup(func() { r.cmd.Process.Signal(syscall.SIGTERM); r.cmd.Wait() })
	const (
		machine = "0d0d0d0d-0000-4222-8333-444444444444"
	)
	type row struct {
		id, mode, title string
		stopped         bool // ccrelay closes its connection itself
		stays           bool // ccrelay stays connected
		extra           map[string]any
	}
	rows := []row{
		{id: "0d0d0d0d-1111-4222-8333-444444444444", mode: "remote", title: "Remote and idle, its machine gone"},
		{id: "0d0d0d0d-2222-4222-8333-444444444444", mode: "local", title: "Local, its ccrelay exited", stopped: true},
		{id: "0d0d0d0d-3333-4222-8333-444444444444", mode: "followed", title: "Followed, its machine asleep"},
		{id: "0d0d0d0d-4444-4222-8333-444444444444", mode: "remote", title: "Started by the daemon, idle", extra: map[string]any{"startedBy": machine}},
		{id: "0d0d0d0d-5555-4222-8333-444444444444", mode: "remote", title: "Remote, its machine still here", stays: true},
	}
	clis := map[string]*fakeCLI{}
	for i, s := range rows {
		cli := dialCLI(t, r)
		clis[s.id] = cli
		cli.envelopes(s.id, turn(fmt.Sprint(i), s.title, "Done.")...)
		info := map[string]any{"cwd": "/home/dev/p" + fmt.Sprint(i), "machine": "laptop", "mode": s.mode, "status": "idle"}
		for k, v := range s.extra {
			info[k] = v
		}
		if s.extra != nil {
			cli.announce(machine, map[string]any{"mode": "machine", "status": "idle", "machine": "laptop", "title": "laptop",
				"daemon": map[string]any{"os": "linux", "arch": "amd64", "folders": []string{}, "running": []string{s.id}}})
		}
		cli.announce(s.id, info)
	}
	ctx := newBrowser(t)
	must(t, ctx, phoneThumb())
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	waitJS(t, ctx, "the list", fmt.Sprintf(`document.querySelectorAll('.session-row').length === %d`, len(rows)))
	if n := eval[int](t, ctx, `document.querySelectorAll('.session-row .chip.gone').length`); n != 0 {
		t.Fatalf("%d sessions marked while their ccrelay is connected", n)
	}

	for _, s := range rows {
		switch {
		case s.stays:
		case s.stopped:
			clis[s.id].c.Close(websocket.StatusNormalClosure, "")
		default:
			clis[s.id].c.CloseNow()
		}
	}
	want := func(s row) string {
		switch {
		case s.stays:
			return ""
		case s.stopped:
			return "ccrelay stopped"
		}
		return "Machine offline"
	}
	var wantAll []string
	for _, s := range rows {
		wantAll = append(wantAll, fmt.Sprintf("%q: %q", s.id, want(s)))
	}
	marks := `Object.fromEntries([...document.querySelectorAll('li.session-row')].map((li) => [li.dataset.session, li.querySelector('.chip.gone')?.textContent || '']))`
	waitJS(t, ctx, "each session marked as its ccrelay went", fmt.Sprintf(`(() => { const m = %s, want = {%s}; return Object.keys(want).every((k) => m[k] === want[k]) })()`, marks, strings.Join(wantAll, ", ")))
	screenshot(t, ctx, "list-gone")
	checkAccessible(t, ctx, "the list with sessions marked")
	// Words with an icon, not a colour alone; said by a screen reader.
	if bad := eval[string](t, ctx, `[...document.querySelectorAll('.chip.gone')].filter((c) => !c.querySelector('svg.icon') || !c.textContent.trim() || c.closest('[aria-hidden=true]')).map((c) => c.closest('li').dataset.session).join(', ')`); bad != "" {
		t.Errorf("marks without an icon and words: %s", bad)
	}
	titles := map[string]string{}
	for _, s := range rows {
		titles[s.id] = s.title
	}
	names := linkNames(t, ctx, titles)
	for _, s := range rows {
		name, ok := names[s.id]
		if !ok {
			t.Errorf("%s: no link in the accessibility tree (%v)", s.title, names)
			continue
		}
		if w := want(s); w != "" && !strings.Contains(name, w) {
			t.Errorf("%s: its link is named %q, without %q", s.title, name, w)
		}
		if s.stays && (strings.Contains(name, "offline") || strings.Contains(name, "stopped")) {
			t.Errorf("%s: its link is named %q", s.title, name)
		}
	}

	// The local session whose ccrelay exited, opened: its top bar and its
	// note say the same as the list, and nothing offers to move it from a
	// terminal where it no longer runs.
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+rows[1].id))
	waitJS(t, ctx, "the note that ccrelay stopped", `(() => { const n = document.querySelector('.machine-note'); return !!n && !n.hidden && n.textContent.startsWith('ccrelay stopped') })()`)
	if s := eval[string](t, ctx, `document.querySelector('.top-sub .status-text').textContent`); s != "ccrelay stopped" {
		t.Errorf("ccrelay stopped, the top bar says %q", s)
	}
	if h := eval[string](t, ctx, `document.querySelector('.composer-hint').textContent`); strings.Contains(h, "terminal") {
		t.Errorf("ccrelay stopped, the prompt box says %q", h)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the list again", fmt.Sprintf(`document.querySelectorAll('.session-row').length === %d`, len(rows)))

	// ccrelay comes back (the machine wakes; ccrelay runs again) and
	// announces itself: the marks go.
	for i, s := range rows[:2] {
		cli := dialCLI(t, r)
		cli.announce(s.id, map[string]any{"cwd": "/home/dev/p" + fmt.Sprint(i), "machine": "laptop", "mode": s.mode, "status": "idle"})
	}
	waitJS(t, ctx, "the marks of those back gone", fmt.Sprintf(`(() => { const m = %s; return m[%q] === '' && m[%q] === '' && m[%q] === 'Machine offline' })()`, marks, rows[0].id, rows[1].id, rows[2].id))
	// The same read afresh from the relay.
	must(t, ctx, chromedp.Reload())
	waitJS(t, ctx, "the list again", fmt.Sprintf(`document.querySelectorAll('.session-row').length === %d`, len(rows)))
	waitJS(t, ctx, "the same marks after a reload", fmt.Sprintf(`(() => { const m = %s; return m[%q] === '' && m[%q] === '' && m[%q] === 'Machine offline' && m[%q] === 'Machine offline' })()`, marks, rows[0].id, rows[1].id, rows[2].id, rows[3].id))
}
