package main

// End-to-end tests of the web app in headless Chromium, driven with
// chromedp, against a real `ccrelay serve` fed by `ccrelay replay`.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/internal/synth"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/web"
)

// chromium finds the browser: $CCRELAY_TEST_CHROMIUM, or chromium on PATH.
// Without one the test is skipped, except in CI (CI=true), which installs
// Debian's chromium and must run these tests.
func chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CCRELAY_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium: CI must install it (.ci/run)")
	}
	t.Skip("no chromium on PATH (set CCRELAY_TEST_CHROMIUM)")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile; the returned
// context drives its first tab, for at most 5 minutes (a loaded machine
// slows a browser test by up to ten times).
func newBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	return newBrowserFor(t, 5*time.Minute, extra...)
}

// newBrowserFor is newBrowser for a test whose browser works longer than
// newBrowser's 5 minutes on a loaded machine: its context lasts budget.
func newBrowserFor(t testing.TB, budget time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(append(chromedp.DefaultExecAllocatorOptions[:], extra...),
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		// Chromium keeps its singleton socket in a folder of its own under
		// TMPDIR, left behind when the browser is killed: keep it in a
		// folder of the test's, short enough for a unix socket's path.
		chromedp.Env("TMPDIR="+socketDir(t)),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	t.Cleanup(cancel)
	return ctx
}

// socketDir returns a folder, removed when the test ends, whose path leaves
// room for a unix socket below it: a socket's path is at most 107 bytes, and
// t.TempDir's paths carry the test's name (Chromium refused to start in CI
// under /tmp/tmp.XXXXXXXXXX/TestAppPermissionDenyReasonAndEdit2269226675/004).
func socketDir(t testing.TB) string {
	t.Helper()
	parent := os.TempDir()
	if len(parent) > 48 {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "cr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func must(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// click clicks the first element sel matches, as chromedp.Click does, and
// again if the app drew that element anew between chromedp finding it and
// clicking it (the node found is gone): the list and a session are drawn
// again on changes, so a click at the wrong moment failed with "Could not
// find node with given id" where a finger would have tapped the new one.
func click(t testing.TB, ctx context.Context, sel string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		if err == nil {
			return
		}
		if !staleNode(err) || time.Now().After(deadline) {
			t.Fatalf("click %s: %v", sel, err)
		}
	}
}

// staleNode says whether err is the browser's answer about a node that
// was removed from the page after it was found.
func staleNode(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Could not find node with given id") ||
		strings.Contains(s, "No node with given id found") ||
		strings.Contains(s, "Node is detached from document")
}

// eval runs JavaScript in the page and returns its value.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %.60s: %v", expr, err)
	}
	return v
}

// phone and desktop are the screen sizes the app is checked at.
func phone() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(375, 812, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)
}

func desktop() chromedp.Action[chromedp.Void] { return chromedp.EmulateViewport(1280, 900) }

// waitJS polls a JavaScript condition in the page until it holds.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		// An evaluation the page's own navigation cuts short (the app
		// starting over on a new #fragment) is tried again.
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if err != nil && !strings.Contains(err.Error(), "navigated or closed") && !strings.Contains(err.Error(), "Cannot find context") {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; page says:\n%s", what, eval[string](t, ctx, `document.body.innerText.slice(0, 2000)`))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// appRelay is a `ccrelay serve` for browser tests.
type appRelay struct {
	data, base, token string
	cmd               *exec.Cmd
}

func startAppRelay(t *testing.T) *appRelay {
	t.Helper()
	r := &appRelay{data: t.TempDir()}
	r.cmd, r.base, r.token = startServe(t, r.data)
	t.Cleanup(func() { r.cmd.Process.Signal(syscall.SIGTERM); r.cmd.Wait() })
	return r
}

// replay sends a transcript to the relay with `ccrelay replay --to` and
// returns the session id and the envelopes it holds.
func (r *appRelay) replay(t *testing.T, transcript string) (string, []protocol.Envelope) {
	t.Helper()
	res := run(t, "replay", "-q", "--to", r.base, "--relay-token", r.token, "--state", t.TempDir(), transcript)
	if res.code != 0 {
		t.Fatalf("replay --to: exit %d\n%s", res.code, res.stderr)
	}
	id := strings.TrimSuffix(filepath.Base(transcript), ".jsonl")
	var envs []protocol.Envelope
	for _, l := range storedLines(t, r.data, id) {
		var e protocol.Envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e)
	}
	if len(envs) == 0 {
		t.Fatalf("nothing stored for %s", id)
	}
	return id, envs
}

// open loads the app from the URL `ccrelay serve` printed, then opens a
// session from the list and waits until it is rendered.
func (r *appRelay) open(t *testing.T, ctx context.Context, session string) {
	t.Helper()
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token))
	row := chromedp.CSS(fmt.Sprintf(`li[data-session=%q] a`, session))
	must(t, ctx, chromedp.WaitVisible(row), chromedp.Click(row))
	waitJS(t, ctx, "the session rendered", fmt.Sprintf(`document.body.dataset.rendered === %q`, session))
}

// showAll renders every earlier block (the app renders the newest first).
//
// It waits for progress, not for a time: each click renders an earlier
// part, which a loaded machine does slowly (a 10,000-envelope session took
// over 30 s of clicks at load 35 on 2 cores); a minute without a new row,
// or three minutes in all, fails.
func showAll(t *testing.T, ctx context.Context) {
	t.Helper()
	const click = `(() => { const b = document.querySelector('.earlier'); if (!b || b.hidden) return -1; b.click(); return document.querySelectorAll('.blocks [data-id]').length; })()`
	began, last, moved := time.Now(), -1, time.Now()
	for {
		n := eval[int](t, ctx, click)
		if n < 0 {
			return
		}
		if n != last {
			last, moved = n, time.Now()
		}
		if time.Since(moved) > time.Minute || time.Since(began) > 3*time.Minute {
			t.Fatalf("not every block rendered: %d rows after %v of clicks; page says:\n%s", last, time.Since(began).Round(time.Second), eval[string](t, ctx, `document.body.innerText.slice(0, 2000)`))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// pageState is what the page shows, read from its DOM.
type pageState struct {
	Turns    []string `json:"turns"`    // status of each turn
	Users    []string `json:"users"`    // prompt texts
	Tools    int      `json:"tools"`    // top-level tool cards
	Failed   int      `json:"failed"`   // top-level tool cards shown failed
	Thinking int      `json:"thinking"` // top-level thinking blocks
	Subs     []struct {
		Title string `json:"title"`
		Tools int    `json:"tools"`
		Texts int    `json:"texts"`
	} `json:"subs"`
	IDs  []string `json:"ids"`
	Text string   `json:"text"`
}

const readPage = `(() => {
  const q = (s, el = document) => [...el.querySelectorAll(s)];
  for (const d of q('details.sub')) if (!d.open) d.open = true;
  return {
    turns: q('.blocks > .turn').map((t) => t.dataset.status),
    users: q('.blocks > .msg.user').map((b) => b.textContent), // a bubble, or chips of Claude Code's markup
    tools: q('.turn-body > .tool').length,
    failed: q('.turn-body > .tool[data-status="failed"]').length,
    thinking: q('.turn-body > .thinking').length,
    subs: q('.blocks .sub').map((s) => ({ title: s.querySelector('.title').textContent,
      tools: q(':scope > .sub-body > .tool', s).length, texts: q(':scope > .sub-body > .text', s).length })),
    ids: q('.blocks [data-id]').map((e) => e.dataset.id),
    text: document.querySelector('.blocks').innerText,
  };
})()`

func readState(t *testing.T, ctx context.Context) pageState {
	t.Helper()
	// Opening the groups builds their bodies on the toggle event: read twice.
	eval[pageState](t, ctx, readPage)
	return eval[pageState](t, ctx, readPage)
}

// expected is what a page must show for a stream of envelopes.
func expected(envs []protocol.Envelope) pageState {
	var st pageState
	turns := map[string]int{}
	subs := map[string]int{}
	for _, e := range envs {
		if e.Turn != "" {
			if _, ok := turns[e.Turn]; !ok {
				turns[e.Turn] = len(st.Turns)
				st.Turns = append(st.Turns, "open") // a recording's unfinished turn: no spinner
			}
		}
		if e.Subagent != "" {
			if _, ok := subs[e.Subagent]; !ok {
				subs[e.Subagent] = len(st.Subs)
				st.Subs = append(st.Subs, struct {
					Title string `json:"title"`
					Tools int    `json:"tools"`
					Texts int    `json:"texts"`
				}{Title: "Subagent"})
			}
		}
		ev := e.Ev
		switch {
		case ev.T == protocol.KindTurnEnd:
			st.Turns[turns[e.Turn]] = string(ev.Status)
		case e.Subagent != "":
			s := &st.Subs[subs[e.Subagent]]
			switch {
			case ev.T == protocol.KindStart && ev.Title != "":
				s.Title = ev.Title
			case ev.T == protocol.KindToolCallStart:
				s.Tools++
			case ev.T == protocol.KindText && e.Role == protocol.RoleAgent && !ev.Thinking:
				s.Texts++
			}
		case e.Role == protocol.RoleUser && ev.T == protocol.KindText:
			st.Users = append(st.Users, ev.Text)
		case ev.T == protocol.KindToolCallStart:
			st.Tools++
		case ev.T == protocol.KindToolCallEnd && ev.Error:
			st.Failed++
		case ev.T == protocol.KindText && ev.Thinking && strings.TrimSpace(ev.Text) != "":
			st.Thinking++ // redacted thinking (no text) shows nothing
		}
	}
	return st
}

func checkShows(t *testing.T, got, want pageState) {
	t.Helper()
	if fmt.Sprint(got.Turns) != fmt.Sprint(want.Turns) {
		t.Errorf("turns: got %v, want %v", got.Turns, want.Turns)
	}
	if len(got.Users) != len(want.Users) {
		t.Errorf("prompts: got %d, want %d", len(got.Users), len(want.Users))
	}
	if got.Tools != want.Tools || got.Failed != want.Failed || got.Thinking != want.Thinking {
		t.Errorf("tools %d (failed %d), thinking %d; want %d (%d), %d", got.Tools, got.Failed, got.Thinking, want.Tools, want.Failed, want.Thinking)
	}
	if fmt.Sprint(got.Subs) != fmt.Sprint(want.Subs) {
		t.Errorf("subagents:\n got %v\nwant %v", got.Subs, want.Subs)
	}
	seen := map[string]bool{}
	for _, id := range got.IDs {
		if seen[id] {
			t.Errorf("row %s shown twice", id)
		}
		seen[id] = true
	}
}

// screenshotEnv names a folder where the tests leave their screenshots (the
// paths are printed); without it they are taken and thrown away with the
// test's temporary folder.
const screenshotEnv = "CCRELAY_TEST_SCREENSHOTS"

// screenshotDir is where a test's screenshots go.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv(screenshotEnv); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(screenshotDir(t), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// A corpus session with tools, thinking and subagents, replayed into the
// relay: the page shows its turns with their status, its prompts, its tool
// cards (failed ones marked), thinking blocks and subagent groups titled by
// their start and holding their own text and tools; no row twice.
// Screenshots at phone and desktop sizes are left for people to look at.
func TestAppShowsSession(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	// Six subagents (some with redacted thinking); visible thinking and 182
	// tool calls.
	for _, file := range []string{
		"/public/claude-code-log/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
		"/public/spotter/test/fixtures/transcripts/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
	} {
		id, envs := r.replay(t, corpus+file)
		want := expected(envs)
		if len(want.Subs) == 0 || want.Tools == 0 {
			t.Fatalf("the test session lacks subagents or tools: %+v", want)
		}
		for _, size := range []struct {
			name string
			vp   chromedp.Action[chromedp.Void]
		}{{"desktop", desktop()}, {"phone", phone()}} {
			t.Run(id[:8]+"-"+size.name, func(t *testing.T) {
				must(t, ctx, size.vp)
				r.open(t, ctx, id)
				screenshot(t, ctx, id[:8]+"-end-"+size.name)
				showAll(t, ctx)
				checkShows(t, readState(t, ctx), want)
				// The page is as wide as the screen: nothing pushes it sideways.
				if w := eval[int](t, ctx, `document.scrollingElement.scrollWidth - innerWidth`); w > 0 {
					t.Errorf("page wider than the screen by %dpx", w)
				}
				// A subagent opened with a tool card, and thinking opened.
				eval[bool](t, ctx, `(() => {
					const subs = [...document.querySelectorAll('details.sub')];
					for (const d of subs) d.open = false;
					const s = subs.find((d) => d.querySelector('details.tool')) || subs[0];
					const th = document.querySelector('details.thinking'); if (th) th.open = true;
					s.open = true;
					const tool = s.querySelector('details.tool'); if (tool) tool.open = true;
					(th || s).scrollIntoView({block: 'start'}); scrollBy(0, -90); return true })()`)
				screenshot(t, ctx, id[:8]+"-detail-"+size.name)
				must(t, ctx, chromedp.Navigate(r.base+"/#/"), chromedp.WaitVisible(chromedp.CSS(".session-row")))
				screenshot(t, ctx, "sessions-"+size.name)
			})
		}
	}
}

// rowsOnce checks that the page shows each envelope at most once, and at
// least min rows.
func rowsOnce(t *testing.T, ctx context.Context, min int) {
	t.Helper()
	ids := eval[[]string](t, ctx, `[...document.querySelectorAll('.blocks [data-id]')].map((e) => e.dataset.id)`)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("row %s shown twice", id)
		}
		seen[id] = true
	}
	if len(ids) < min {
		t.Fatalf("%d rows shown, want at least %d", len(ids), min)
	}
}

// pick chooses value in the select labelled label, as a person would: one
// change event.
func pick(t *testing.T, ctx context.Context, label, value string) {
	t.Helper()
	eval[bool](t, ctx, fmt.Sprintf(`(() => { const s = document.querySelector('select[aria-label=%q]'); s.value = %q; s.dispatchEvent(new Event('change')); return true })()`, label, value))
}

// fakeCLI is the CLI side of a session, on the relay's /ws/cli: it
// announces the session, receives the app's commands and answers them.
type fakeCLI struct {
	t      *testing.T
	c      *websocket.Conn
	frames chan protocol.Frame
	held   []protocol.Frame // read while waiting for another, not handled yet
	refs   int
}

func dialCLI(t *testing.T, r *appRelay) *fakeCLI { return dialCLIWith(t, r.base, r.token, nil) }

// dialCLIWith connects a fake CLI to the relay at base with the
// credential token, through client (nil: the default).
func dialCLIWith(t *testing.T, base, token string, client *http.Client) *fakeCLI {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/cli",
		&websocket.DialOptions{HTTPClient: client, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	cli := &fakeCLI{t: t, c: c, frames: make(chan protocol.Frame, 256)}
	done := make(chan struct{})
	go func() { // owned by the test: ends when the connection closes
		defer close(done)
		defer close(cli.frames)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			var f protocol.Frame
			if json.Unmarshal(b, &f) == nil {
				cli.frames <- f
			}
		}
	}()
	t.Cleanup(func() { c.CloseNow(); <-done })
	return cli
}

func (c *fakeCLI) send(f protocol.Frame) {
	c.t.Helper()
	f.V = protocol.FrameVersion
	b, _ := json.Marshal(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

// request sends f with a fresh ref and returns the relay's reply to it.
func (c *fakeCLI) request(f protocol.Frame) protocol.Frame {
	c.t.Helper()
	c.refs++
	f.Ref = fmt.Sprint("r", c.refs)
	c.send(f)
	for {
		reply := c.read()
		if reply.Ref == f.Ref {
			if reply.Type == protocol.FrameError {
				c.t.Fatalf("relay refused %s: %s", f.Type, reply.Message)
			}
			return reply
		}
		if reply.Type == protocol.FrameCommand {
			c.held = append(c.held, reply) // for a later next(FrameCommand)
		}
	}
}

// next returns the next frame of type typ, skipping others.
func (c *fakeCLI) next(typ string) protocol.Frame {
	c.t.Helper()
	for i, f := range c.held {
		if f.Type == typ {
			c.held = append(c.held[:i], c.held[i+1:]...)
			return f
		}
	}
	for {
		if f := c.read(); f.Type == typ {
			return f
		}
	}
}

// read returns the next frame the relay sends.
func (c *fakeCLI) read() protocol.Frame {
	c.t.Helper()
	select {
	case f, ok := <-c.frames:
		if !ok {
			c.t.Fatal("CLI connection closed")
		}
		return f
	case <-time.After(30 * time.Second):
		c.t.Fatal("the relay sent the CLI nothing for 30 s")
	}
	return protocol.Frame{}
}

func (c *fakeCLI) announce(session string, info map[string]any) {
	c.t.Helper()
	b, _ := json.Marshal(info)
	c.request(protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Info: b})
}

// command waits for the app's next command and answers it with status.
func (c *fakeCLI) command(status, message string) protocol.Command {
	c.t.Helper()
	f := c.next(protocol.FrameCommand)
	c.request(protocol.Frame{Type: protocol.FrameResult, Session: f.Session, Command: &protocol.Command{ID: f.Command.ID}, Status: status, Message: message})
	return *f.Command
}

// envelopes stores envelopes (JSON objects) and waits for the ack.
func (c *fakeCLI) envelopes(session string, envs ...string) {
	c.t.Helper()
	raw := make([]json.RawMessage, len(envs))
	for i, e := range envs {
		raw[i] = json.RawMessage(e)
	}
	if f := c.request(protocol.Frame{Type: protocol.FrameEnvelopes, Session: session, Envelopes: raw}); len(f.Acks) != len(envs) {
		c.t.Fatalf("ack %+v", f)
	}
}

// turn is the envelopes of a prompt and its answer, with ids from tag.
func turn(tag, prompt, answer string) []string {
	now := time.Now().UnixMilli()
	e := func(id, role, turn, ev string) string {
		s := fmt.Sprintf(`{"id":"c%s%s","time":%d,"role":%q`, tag, id, now, role)
		if turn != "" {
			s += fmt.Sprintf(`,"turn":"ct%s"`, tag)
		}
		return s + `,"ev":` + ev + `}`
	}
	p, _ := json.Marshal(prompt)
	a, _ := json.Marshal(answer)
	return []string{
		e("u", "user", "", `{"t":"text","text":`+string(p)+`}`),
		e("s", "agent", "t", `{"t":"turn-start"}`),
		e("a", "agent", "t", `{"t":"text","text":`+string(a)+`}`),
		e("e", "agent", "t", `{"t":"turn-end","status":"completed"}`),
	}
}

const smallSession = "/claude-code-2.1.330/tool-bash/transcripts/-home-dev-project/f3c00ff8-acc8-40a5-8381-28d40134d6cd.jsonl"

// Steering from the page: a prompt typed in the page reaches the CLI as a
// command and shows once when the session has it; permission requests the
// CLI announces show with Allow / Deny (and "for this session" only where
// offered), and each answer reaches the CLI; Interrupt shows while the
// agent works and reaches the CLI; the model and permission-mode pickers
// send their commands; a command the CLI rejects says why.
func TestAppSteers(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"cwd": "/home/dev/project", "machine": "laptop", "mode": "local", "status": "idle"})
	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, id)

	// A prompt.
	must(t, ctx, typeInto("textarea", "run the tests"), chromedp.Click(chromedp.CSS("button.send")))
	cmd := cli.command(protocol.StatusDone, "")
	if cmd.Kind != protocol.CommandPrompt || cmd.Text != "run the tests" {
		t.Fatalf("command %+v", cmd)
	}
	waitJS(t, ctx, "the prompt pending", `document.querySelectorAll('.pending-msg').length === 1`)
	cli.envelopes(id, turn("p1", "run the tests", "All 12 tests pass.")...)
	waitJS(t, ctx, "the prompt in the session, once", `document.querySelectorAll('.pending-msg').length === 0 &&
		[...document.querySelectorAll('.blocks .msg.user .bubble')].filter((b) => b.textContent === 'run the tests').length === 1 &&
		document.querySelector('.blocks').innerText.includes('All 12 tests pass.')`)
	rowsOnce(t, ctx, 6) // the recording: prompt, text, tool, text; the new turn: prompt, text

	// Two permission requests; one offers "for this session".
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "rm -rf build"}, "description": "Remove the build folder", "call": "toolu_9", "forSession": []string{"Bash(rm:*)"}},
		{"id": "req-2", "tool": "Write", "input": map[string]any{"file_path": "/home/dev/project/x.txt", "content": "x"}, "call": "toolu_10"},
	}})
	waitJS(t, ctx, "two requests", `document.querySelectorAll('.perm').length === 2`)
	if eval[string](t, ctx, `[...document.querySelectorAll('.perm')].map((p) => p.dataset.request + ':' + !!p.querySelector('button.session')).join(' ')`) != "req-1:true req-2:false" {
		t.Fatal("allow for the session shown where not offered, or missing")
	}
	screenshot(t, ctx, "permission-phone")
	click(t, ctx, `.perm[data-request="req-1"] button.session`)
	if c := cli.command(protocol.StatusDone, ""); c.Kind != protocol.CommandPermission || c.RequestID != "req-1" || !c.Allow || !c.ForSession {
		t.Fatalf("answer %+v", c)
	}
	click(t, ctx, `.perm[data-request="req-2"] .perm-actions button.deny`)
	if c := cli.command(protocol.StatusDone, ""); c.Kind != protocol.CommandPermission || c.RequestID != "req-2" || c.Allow || c.Reason == "" {
		t.Fatalf("answer %+v", c)
	}
	waitJS(t, ctx, "answered requests hidden", `document.querySelectorAll('.perm').length === 0`)

	// Interrupt while busy; the CLI rejects it and the page says why.
	cli.announce(id, map[string]any{"mode": "remote", "status": "busy"})
	waitJS(t, ctx, "the interrupt button", `!document.querySelector('button.stop').hidden`)
	click(t, ctx, "button.stop")
	if c := cli.command(protocol.StatusRejected, "Claude is not working on anything"); c.Kind != protocol.CommandAbort {
		t.Fatalf("command %+v", c)
	}
	waitJS(t, ctx, "the rejection shown", `(document.querySelector('.toast')?.textContent || '').includes('Claude is not working on anything')`)
	cli.announce(id, map[string]any{"mode": "remote", "status": "idle", "model": "sonnet"})
	waitJS(t, ctx, "no interrupt when idle", `document.querySelector('button.stop').hidden`)

	// Model and permission mode.
	must(t, ctx, chromedp.Click(chromedp.CSS(`button[aria-label="Session settings"]`)), chromedp.WaitVisible(chromedp.CSS("dialog.sheet select")))
	screenshot(t, ctx, "settings-phone")
	pick(t, ctx, "Model", "opus")
	if c := cli.command(protocol.StatusDone, ""); c.Kind != protocol.CommandModel || c.Model != "opus" {
		t.Fatalf("command %+v", c)
	}
	pick(t, ctx, "Permission mode", "plan")
	if c := cli.command(protocol.StatusDone, ""); c.Kind != protocol.CommandPermissionMode || c.Mode != "plan" {
		t.Fatalf("command %+v", c)
	}
	if len(cli.held) != 0 {
		t.Fatalf("commands sent more than once: %+v", cli.held)
	}
}

// The relay restarts under an open page: the page says it is offline,
// reconnects by itself, catches up from the last sequence number it saw
// and shows the envelopes stored meanwhile and after, each once.
func TestAppReconnects(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, id)
	rowsOnce(t, ctx, 4)
	addr := strings.TrimPrefix(r.base, "http://")

	for round := range 3 {
		r.cmd.Process.Signal(syscall.SIGTERM)
		r.cmd.Wait()
		waitJS(t, ctx, "the page offline", `document.body.dataset.conn !== 'open' && !document.querySelector('.conn-banner').hidden`)
		if round == 0 {
			screenshot(t, ctx, "offline-phone")
		}
		r.cmd = restartServe(t, r.data, addr)
		// Stored while the page is still away (or just back), and after.
		cli := dialCLI(t, r)
		tag := fmt.Sprint("r", round)
		cli.envelopes(id, turn(tag+"a", "while away "+tag, "answer one "+tag)...)
		waitJS(t, ctx, "the page back", `document.body.dataset.conn === 'open'`)
		cli.envelopes(id, turn(tag+"b", "after "+tag, "answer two "+tag)...)
		waitJS(t, ctx, "the new turns", fmt.Sprintf(`document.querySelector('.blocks').innerText.includes('answer two %s')`, tag))
		rowsOnce(t, ctx, 4+4*(round+1))
		if n := eval[int](t, ctx, `document.querySelectorAll('.blocks [data-id]').length`); n != 4+4*(round+1) {
			t.Fatalf("round %d: %d rows", round, n)
		}
	}
}

// Agent text is untrusted: a <script>, an <img onerror> and javascript:
// links in it show as text and never run; http links stay links.
func TestAppRendersTextInert(t *testing.T) {
	dir := t.TempDir()
	const session = "0e0e0e0e-1111-4222-8333-444444444444"
	text := "Here is <script>window.pwned = 1</script> and <img src=x onerror=\"window.pwned = 2\">.\n\n" +
		"[click me](javascript:window.pwned=3) and [also](JaVaScRiPt:window.pwned=4) and <javascript:window.pwned=5> " +
		"and [data](data:text/html,<script>window.pwned=6</script>) and [fine](https://example.com/docs).\n\n" +
		"```html\n<script>window.pwned = 7</script>\n```\n\n| a | b |\n|---|---|\n| <b onclick=\"window.pwned=8\">x</b> | `<i>` |"
	a, _ := json.Marshal(text)
	lines := `{"type":"user","uuid":"11111111-0000-4000-8000-000000000001","sessionId":"` + session + `","timestamp":"2026-11-23T10:00:00Z","message":{"role":"user","content":"show me <b>bold</b>"}}` + "\n" +
		`{"type":"assistant","uuid":"11111111-0000-4000-8000-000000000002","parentUuid":"11111111-0000-4000-8000-000000000001","sessionId":"` + session + `","timestamp":"2026-11-23T10:00:01Z","message":{"id":"msg_x1","role":"assistant","content":[{"type":"text","text":` + string(a) + `}]}}` + "\n"
	file := filepath.Join(dir, session+".jsonl")
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startAppRelay(t)
	id, _ := r.replay(t, file)
	ctx := newBrowser(t)
	r.open(t, ctx, id)
	// Click every link the text made, then look for any effect.
	eval[bool](t, ctx, `(() => { for (const a of document.querySelectorAll('.blocks a')) { a.target = ''; a.addEventListener('click', (e) => e.preventDefault()); a.click(); } return true })()`)
	got := eval[map[string]any](t, ctx, `(() => {
		const b = document.querySelector('.blocks');
		return {
			pwned: window.pwned ?? null,
			scripts: b.querySelectorAll('script').length,
			imgs: b.querySelectorAll('img').length,
			handlers: [...b.querySelectorAll('*')].filter((e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length,
			bold: b.querySelectorAll('b, i').length,
			hrefs: [...b.querySelectorAll('a')].map((a) => a.getAttribute('href')),
			text: b.innerText,
		} })()`)
	if got["pwned"] != nil || got["scripts"].(float64) != 0 || got["imgs"].(float64) != 0 || got["handlers"].(float64) != 0 || got["bold"].(float64) != 0 {
		t.Fatalf("markup in the text took effect: %v", got)
	}
	if fmt.Sprint(got["hrefs"]) != "[https://example.com/docs]" {
		t.Fatalf("links: %v", got["hrefs"])
	}
	for _, want := range []string{"<script>window.pwned = 1</script>", `<img src=x onerror="window.pwned = 2">`, "click me", "show me <b>bold</b>", "<script>window.pwned = 7</script>"} {
		if !strings.Contains(got["text"].(string), want) {
			t.Errorf("the page does not show %q as text:\n%s", want, got["text"])
		}
	}
}

// largeSession replays a session of at least 10,000 envelopes (copies of a
// real 634-envelope session with 241 tool calls) into r.
func largeSession(t *testing.T, r *appRelay) (string, []protocol.Envelope) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0a0a0a0a-1111-4222-8333-444444444444.jsonl")
	writeLargeTranscript(t, p)
	id, envs := r.replay(t, p)
	if len(envs) < 10000 {
		t.Fatalf("only %d envelopes", len(envs))
	}
	return id, envs
}

// writeLargeTranscript writes at p the transcript largeSession replays.
func writeLargeTranscript(t *testing.T, p string) {
	t.Helper()
	src, err := synth.Load(corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := synth.Write(f, 68<<20, src); err != nil {
		t.Fatal(err)
	}
}

// openTimed loads the app afresh straight on a session and returns how long
// after the navigation began the session was first painted.
func openTimed(t testing.TB, ctx context.Context, r *appRelay, id string) time.Duration {
	t.Helper()
	must(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(r.base+"/#/s/"+id))
	waitJS(t, ctx, "the session painted", fmt.Sprintf(`document.body.dataset.painted === %q`, id))
	ms := eval[float64](t, ctx, `performance.getEntriesByName('ccrelay:session-painted')[0].startTime`)
	t.Logf("marks: %s", eval[string](t, ctx, `performance.getEntriesByType('mark').map((m) => m.name.replace('ccrelay:', '') + '=' + Math.round(m.startTime)).join(' ') + ' domContentLoaded=' + Math.round(performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd)`))
	return time.Duration(ms * float64(time.Millisecond))
}

// A 10,000-envelope session opens (page load, connection, history, model,
// first paint) in well under 2 s, showing its end; earlier turns render as
// the reader scrolls up, each row once. The figure (median of three fresh
// loads) is logged; the bound checked is loose, for gross regressions only.
func TestAppOpensLargeSession(t *testing.T) {
	r := startAppRelay(t)
	id, envs := largeSession(t, r)
	ctx := newBrowser(t)
	must(t, ctx, chromedp.Navigate(r.base+"/#token="+r.token), chromedp.WaitVisible(chromedp.CSS(".session-row")))
	var times []time.Duration
	for range 3 {
		times = append(times, openTimed(t, ctx, r, id))
	}
	slices.Sort(times)
	t.Logf("%d envelopes: opened in %v (median of %v)", len(envs), times[1], times)
	if times[1] > 5*time.Second {
		t.Errorf("a 10,000-envelope session took %v to open", times[1])
	}
	// The end is shown; the page holds a fraction of the rows.
	var last string
	for _, e := range slices.Backward(envs) {
		if e.Ev.T == protocol.KindText && e.Subagent == "" && !e.Ev.Thinking && strings.TrimSpace(e.Ev.Text) != "" {
			last = strings.Fields(e.Ev.Text)[0]
			break
		}
	}
	if !eval[bool](t, ctx, fmt.Sprintf(`document.querySelector('.blocks').innerText.includes(%q)`, last)) {
		t.Errorf("the last text (%q…) is not shown", last)
	}
	rows := eval[int](t, ctx, `document.querySelectorAll('.blocks [data-id]').length`)
	t.Logf("rows on the page after opening: %d", rows)
	start := time.Now()
	showAll(t, ctx)
	t.Logf("every earlier block rendered by scrolling up in %v", time.Since(start))
	st := readState(t, ctx)
	checkShows(t, st, expected(envs))
}

// badFrameRelay is a fake relay for the app that sends, among good frames,
// frames the app cannot use: not JSON, of another version, with unknown
// fields, with fields of the wrong type, and one that is not UTF-8 (which
// makes the browser drop the connection each time it arrives).
func badFrameRelay(t *testing.T) string {
	t.Helper()
	const good = "0a0a0a0a-1111-4222-8333-444444444444"
	env := func(seq int, id, role, turn, ev string) string {
		tf := ""
		if turn != "" {
			tf = `,"turn":"` + turn + `"`
		}
		return fmt.Sprintf(`{"seq":%d,"envelope":{"id":"%s","time":%d,"role":"%s"%s,"ev":%s}}`, seq, id, 1795373975000+seq*1000, role, tf, ev)
	}
	history := []string{
		env(1, "u1", "user", "", `{"t":"text","text":"Please fix the flaky test"}`),
		env(2, "ts", "agent", "t1", `{"t":"turn-start"}`),
		env(3, "a1", "agent", "t1", `{"t":"text","text":"first answer before the bad ones"}`),
		env(4, "a2", "agent", "t1", "{\"t\":\"text\",\"text\":\"not \xff\xfe UTF-8\"}"),
		env(5, "a3", "agent", "t1", `{"t":"text","text":{"not":"text"}}`),
		env(6, "a4", "agent", "t1", `{"t":"text","text":"answer after the bad ones","future":{"field":1}}`),
		env(7, "te", "agent", "t1", `{"t":"turn-end","status":"completed"}`),
	}
	batch := func(items ...string) string {
		return `{"v":1,"type":"batch","session":"` + good + `","items":[` + strings.Join(items, ",") + `]}`
	}
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler())
	mux.HandleFunc("/ws/app", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"ccrelay-token.bad-frames"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		send := func(frames ...string) {
			for _, f := range frames {
				if c.Write(ctx, websocket.MessageText, []byte(f)) != nil {
					return
				}
			}
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var f struct {
				Type  string
				After int
			}
			json.Unmarshal(b, &f)
			switch f.Type {
			case "list":
				send(`{"v":1,"type":"sessions","sessions":[`+
					`{"id":"`+good+`","info":{"cwd":"/home/dev/greet","machine":"laptop","status":"idle"},"prompt":"Please fix the flaky test","lastSeq":7,"updated":1795373982000},`+
					`{"id":42,"info":"not an object","lastSeq":"x"},`+
					`{"id":"0b0b0b0b-1111-4222-8333-444444444444","info":{"title":{"not":"text"},"cwd":7},"prompt":"The other session","lastSeq":0,"updated":1795373000000,"future":true}]}`,
					"this is not JSON {",
					`{"v":2,"type":"sessions","sessions":[]}`,
					`{"v":1,"type":"session","sessions":"not a list"}`,
					`{"v":1,"type":"session","sessions":[{"id":""}]}`)
			case "subscribe":
				switch {
				case f.After < 3:
					send(batch(history[f.After:3]...), "{not json")
					fallthrough
				case f.After == 3:
					send(batch(history[3:]...)) // not UTF-8: the browser drops the connection
				default:
					send(batch(history[f.After:]...), `{"v":1,"type":"caught-up","session":"`+good+`","seq":7}`)
				}
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// The app survives frames it cannot use, in the session list and in a
// session's history: it skips them, says so in a note, and shows the other
// sessions and envelopes.
func TestAppSurvivesBadFrames(t *testing.T) {
	base := badFrameRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone(), chromedp.Navigate(base+"/#token=bad-frames"))
	waitJS(t, ctx, "both good sessions listed", `document.querySelectorAll('li.session-row').length === 2 && !!document.querySelector('li[data-session="0b0b0b0b-1111-4222-8333-444444444444"]')`)
	waitJS(t, ctx, "a note on the list page", `(() => { const n = document.querySelector('.skip-note'); return !!n && !n.hidden && n.textContent.includes('Skipped') })()`)
	if rows := eval[string](t, ctx, `document.querySelector('.sessions').innerText`); !strings.Contains(rows, "Please fix the flaky test") || !strings.Contains(rows, "The other session") {
		t.Fatalf("rows:\n%s", rows)
	}
	t.Logf("list note: %s", eval[string](t, ctx, `document.querySelector('.skip-note').textContent`))
	screenshot(t, ctx, "bad-frames-list-phone")

	click(t, ctx, `li[data-session="0a0a0a0a-1111-4222-8333-444444444444"] a`)
	waitJS(t, ctx, "the session shown past the bad envelopes", `(() => { const b = document.querySelector('.blocks'); return !!b && b.innerText.includes('answer after the bad ones') })()`)
	text := eval[string](t, ctx, `document.querySelector('.blocks').innerText`)
	for _, want := range []string{"Please fix the flaky test", "first answer before the bad ones", "answer after the bad ones"} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "UTF-8") || strings.Contains(text, "[object Object]") {
		t.Errorf("a bad envelope is shown:\n%s", text)
	}
	if st := eval[string](t, ctx, `document.querySelector('.blocks > .turn').dataset.status`); st != "completed" {
		t.Errorf("turn %s, want completed", st)
	}
	note := eval[string](t, ctx, `(() => { const n = document.querySelector('.skip-note'); return n.hidden ? '' : n.textContent })()`)
	if !strings.Contains(note, "Skipped 3 things") {
		t.Errorf("note %q, want 3 things skipped (a frame not JSON, an envelope not UTF-8, one it cannot render)", note)
	}
	t.Logf("session note: %s", note)
	screenshot(t, ctx, "bad-frames-session-phone")
}

// A forked session says which session it forks, with a link to it (its
// title when the app knows it); a parent that is not a session id is not
// shown.
func TestAppForkLinksParent(t *testing.T) {
	r := startAppRelay(t)
	parent, _ := r.replay(t, corpus+smallSession)
	fork, _ := r.replay(t, corpus+"/claude-code-2.1.330/say-hi/transcripts/-home-dev-project/d83aa5ad-de94-4b51-a9ae-d6e89d27d795.jsonl")
	cli := dialCLI(t, r)
	cli.announce(parent, map[string]any{"cwd": "/home/dev/project", "mode": "local", "status": "idle", "title": "The parent session"})
	cli.announce(fork, map[string]any{"cwd": "/home/dev/project", "mode": "local", "status": "idle", "forkedFrom": parent})
	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, fork)
	waitJS(t, ctx, "the link to the parent", `(() => { const a = document.querySelector('a.fork-link');
		return a && a.textContent === 'forked from The parent session' && a.getAttribute('href') === '#/s/`+parent+`'; })()`)
	click(t, ctx, "a.fork-link")
	waitJS(t, ctx, "the parent open", `location.hash === '#/s/`+parent+`' && !document.querySelector('a.fork-link')`)
}

// A rate limit reached or near shows in the session's header; none while
// the limit is fine.
func TestAppShowsRateLimit(t *testing.T) {
	r := startAppRelay(t)
	id, _ := r.replay(t, corpus+smallSession)
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"mode": "remote", "status": "idle", "rateLimit": map[string]any{"status": "allowed", "rateLimitType": "five_hour"}})
	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the header", `document.querySelector('.top-sub') && document.querySelector('.top-sub').textContent.includes('Remote')`)
	if eval[bool](t, ctx, `!!document.querySelector('.rate-limit')`) {
		t.Fatal("a rate limit chip while the limit is fine")
	}
	cli.announce(id, map[string]any{"mode": "remote", "status": "idle", "rateLimit": map[string]any{"status": "rejected", "rateLimitType": "five_hour", "resetsAt": 1795478400}})
	waitJS(t, ctx, "the rate limit chip", `(document.querySelector('.rate-limit')?.textContent || '').startsWith('Rate limited until')`)
}

// A running subagent of a remote session has a Stop button: it sends
// stop-task for that subagent, and goes once the subagent stopped. A local
// session's subagent has none. What Claude says the subagent does now
// (task_progress) shows under it.
func TestAppStopsSubagent(t *testing.T) {
	r := startAppRelay(t)
	const id = "45454545-2222-4333-8444-555555555555"
	sub := protocol.SubagentID("toolu_bg1")
	now := time.Now().UnixMilli()
	env := func(tag, ev string, withSub bool) string {
		s := fmt.Sprintf(`{"id":"csub%s","time":%d,"role":"agent","turn":"ctsub"`, tag, now)
		if withSub {
			s += `,"subagent":"` + sub + `"`
		}
		return s + `,"ev":` + ev + `}`
	}
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"mode": "local", "status": "busy"})
	cli.envelopes(id, fmt.Sprintf(`{"id":"csubu","time":%d,"role":"user","ev":{"t":"text","text":"spawn a helper"}}`, now),
		env("ts", `{"t":"turn-start"}`, false), env("st", `{"t":"start","title":"Count files"}`, true),
		env("tx", `{"t":"text","text":"counting"}`, true))
	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the subagent", `!!document.querySelector('details.sub')`)
	shown := `getComputedStyle(document.querySelector('details.sub .sub-stop')).display !== 'none'`
	if eval[bool](t, ctx, shown) {
		t.Fatal("a Stop button in a local session")
	}
	cli.announce(id, map[string]any{"mode": "remote", "status": "busy", "tasks": []map[string]any{
		{"subagent": sub, "description": "Count files", "lastTool": "Bash", "tokens": 1200, "toolUses": 3}}})
	waitJS(t, ctx, "the Stop button", shown)
	waitJS(t, ctx, "the subagent's progress", `document.querySelector('details.sub > .progress').textContent === 'Bash · 3 tools · 1.2k tokens'`)
	// Clicked by script: on a phone-sized page the prompt box covers the
	// end of the conversation until it scrolls.
	eval[any](t, ctx, `document.querySelector('details.sub .sub-stop').click()`)
	cmd := cli.command(protocol.StatusDone, "")
	if cmd.Kind != protocol.CommandStopTask || cmd.Subagent != sub {
		t.Fatalf("command %+v", cmd)
	}
	cli.envelopes(id, env("sp", `{"t":"stop"}`, true))
	waitJS(t, ctx, "the Stop button gone", `!(`+shown+`) && document.querySelector('details.sub').dataset.status === 'done'`)
}
