package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"
)

// startLoggedAppRelay is startAppRelay with the relay's log (stderr, and
// stdout after its banner) kept in a file, returned.
func startLoggedAppRelay(t *testing.T) (*appRelay, string) {
	t.Helper()
	r := &appRelay{data: t.TempDir()}
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(binary, "serve", "--data", r.data, "--listen", "127.0.0.1:0")
	out, _ := r.cmd.StdoutPipe()
	r.cmd.Stderr = logFile
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		r.cmd.Wait()
		<-copied
		logFile.Close()
	})
	sc := bufio.NewScanner(out)
	re := regexp.MustCompile(`app:\s+(http://[0-9.:]+)/#token=([0-9a-f]+)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			r.base, r.token = m[1], m[2]
			break
		}
	}
	go func() { // ends when serve exits (its stdout closes)
		defer close(copied)
		io.Copy(logFile, out)
	}()
	if r.base == "" {
		t.Fatal("serve printed no app URL")
	}
	return r, logPath
}

// relayFilesHold reports which of the relay's files (its data folder:
// database, WAL, anything else) or its log hold marker.
func relayFilesHold(t *testing.T, data, logPath, marker string) []string {
	t.Helper()
	var found []string
	check := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(marker)) {
			found = append(found, p)
		}
	}
	filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			check(p)
		}
		return nil
	})
	check(logPath)
	return found
}

// checkAccessible runs axe-core on the page as TestAppAccessible does, in
// both themes, where it is installed (CI always sets CCRELAY_TEST_AXE).
func checkAccessible(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	p := os.Getenv(axeEnv)
	if p == "" {
		return
	}
	script, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read axe-core: %v", err)
	}
	for _, th := range []string{"dark", "light"} {
		must(t, ctx, theme(th))
		for _, v := range runAxe(t, ctx, string(script)) {
			t.Errorf("%s (%s theme): %s (%s) %s: %q", what, th, v.ID, v.Impact, v.Help, v.Nodes)
		}
	}
}

// sentFrames records what the page sends on its websockets from now on
// (window.__sent), whatever socket.
const sentFrames = `(() => { if (window.__sent) return true; window.__sent = []; const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (d) { window.__sent.push(String(d)); return send.call(this, d); }; return true; })()`

// sealedOnPhone is a relay that logs to a file, a browser at a phone's size
// paired with it, and a sealed session of the machine replayed there and
// announced idle in remote mode by a CLI of the machine.
type sealedOnPhone struct {
	r         *appRelay
	logPath   string
	ctx       context.Context
	state, id string
	kr        *apiclient.Keyring
	cli       *fakeCLI
}

func newSealedOnPhone(t *testing.T) sealedOnPhone {
	t.Helper()
	r, logPath := startLoggedAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)
	_, id := replaySealed(t, r, state)
	kr, err := openKeyring(state)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kr.SealInfo(id, json.RawMessage(`{"title":"a sealed session","machine":"laptop","mode":"remote","status":"idle"}`))
	if err != nil {
		t.Fatal(err)
	}
	cli := dialCLI(t, r)
	cli.request(protocol.Frame{Type: protocol.FrameAnnounce, Session: id, Info: info})
	return sealedOnPhone{r: r, logPath: logPath, ctx: ctx, state: state, id: id, kr: kr, cli: cli}
}

// A paired device whose key for a sealed session the relay withholds
// types a marker and sends it: nothing leaves the page (no frame holds
// it), the relay's database, WAL and log never see it, and the composer
// keeps the text and says why it was not sent and what to do. The same
// for a start sent to the machine's daemon, which is sealed as well.
func TestAppNeverSendsPlaintextToSealedSession(t *testing.T) {
	sp := newSealedOnPhone(t)
	r, logPath, ctx, state, id, kr, cli := sp.r, sp.logPath, sp.ctx, sp.state, sp.id, sp.kr, sp.cli

	// The relay withholds the device's key (a curious operator can).
	wdb, err := sql.Open("sqlite", "file:"+filepath.Join(r.data, "relay.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	if res, err := wdb.Exec(`DELETE FROM session_keys WHERE session = ?`, id); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d keys withheld", n)
	}
	// The page starts afresh (no key in memory) and opens the session.
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id), chromedp.Reload())
	waitJS(t, ctx, "the session known locked", fmt.Sprintf(`ccrelay.sessions.get(%q)?.info?.locked === true`, id))
	waitJS(t, ctx, "the prompt box", `!document.querySelector('.composer textarea').disabled`)
	eval[bool](t, ctx, sentFrames)

	const marker = "MARKER-7f3a-never-plaintext"
	must(t, ctx, typeInto("textarea", marker), chromedp.Click(chromedp.CSS("button.send")))
	waitJS(t, ctx, "the composer's note", `(() => { const n = document.querySelector('.seal-note'); return !!n && !n.hidden && n.textContent.length > 0 })()`)
	note := eval[string](t, ctx, `document.querySelector('.seal-note').textContent`)
	for _, want := range []string{"Not sent", "end-to-end encrypted", "no key", "ccrelay pair"} {
		if !strings.Contains(note, want) {
			t.Errorf("the note says %q, without %q", note, want)
		}
	}
	if role := eval[string](t, ctx, `document.querySelector('.seal-note').getAttribute('role')`); role != "alert" {
		t.Errorf("the note's role is %q", role)
	}
	if v := eval[string](t, ctx, `document.querySelector('.composer textarea').value`); v != marker {
		t.Errorf("the composer holds %q, not what was typed", v)
	}
	if d := eval[string](t, ctx, `document.querySelector('.composer textarea').getAttribute('aria-describedby') || ''`); d != "seal-note" {
		t.Errorf("the prompt box is described by %q", d)
	}
	if eval[bool](t, ctx, `!!document.querySelector('.pending-msg')`) {
		t.Error("the prompt is shown as pending")
	}
	if c := eval[string](t, ctx, `document.querySelector('.top-sub .chip.warn')?.textContent || ''`); !strings.Contains(c, "no key") {
		t.Errorf("the header says %q of the session's protection", c)
	}
	checkAccessible(t, ctx, "the composer's note")

	// A machine's daemon, sealed (its key withheld too): a start typed in
	// the New session sheet is not sent either.
	machine := "0b0e0b0e-0000-4000-8000-0000000000aa"
	minfo, err := kr.SealInfo(machine, json.RawMessage(`{"mode":"machine","status":"idle","machine":"laptop","daemon":{"folders":[{"dir":"/home/dev/MARKER-folder"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	cli.request(protocol.Frame{Type: protocol.FrameAnnounce, Session: machine, Info: minfo})
	waitJS(t, ctx, "the machine listed", fmt.Sprintf(`ccrelay.sessions.get(%q)?.info?.locked === true`, machine))
	start := evalAwait[map[string]any](t, ctx, fmt.Sprintf(`new Promise((ok) => { const id = %q; const c = { kind: 'start', target: %q, dir: '/home/dev/%s-start', text: %q };
	  import('./js/e2e.js').then((e2e) => e2e.sealCommand(id, { id: 'startq', ...c }, ccrelay.sessions.get(id).info)).then(() => ok({ sent: true }), (e) => ok({ sent: false, name: e.constructor.name, message: e.message })); })`,
		machine, id, marker, marker))
	if start["sent"] != false || start["name"] != "NotSentError" || !strings.Contains(fmt.Sprint(start["message"]), "no key") {
		t.Errorf("a start to the sealed machine: %v", start)
	}

	// Nothing held the marker: no frame the page sent, no file of the relay.
	if sent := eval[[]string](t, ctx, `window.__sent`); strings.Contains(strings.Join(sent, "\n"), marker) {
		t.Errorf("the page sent the marker: %q", sent)
	}

	// This browser paired again with `ccrelay pair --no-wait`: a device the
	// machine never confirmed, so never given a key. The same refusal.
	res := run(t, "pair", "--no-wait", "--relay", r.base, "--data", r.data, "--state", state)
	link := regexp.MustCompile(`open:\s+(http://\S+#pair=\S+)`).FindStringSubmatch(res.stdout)
	if res.code != 0 || link == nil {
		t.Fatalf("pair --no-wait: %+v", res)
	}
	must(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(link[1]))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	must(t, ctx, chromedp.SetValue(chromedp.CSS("input.pair-name"), "Unconfirmed phone"), chromedp.Click(chromedp.CSS(".pair-form button")))
	waitJS(t, ctx, "the list", `!!document.querySelector('.device-bar')`)
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id))
	waitJS(t, ctx, "the session known locked", fmt.Sprintf(`ccrelay.sessions.get(%q)?.info?.locked === true && !document.querySelector('.composer textarea').disabled`, id))
	eval[bool](t, ctx, sentFrames)
	const marker2 = "MARKER-9c1d-unconfirmed-device"
	must(t, ctx, typeInto("textarea", marker2), chromedp.Click(chromedp.CSS("button.send")))
	waitJS(t, ctx, "the composer's note", `(() => { const n = document.querySelector('.seal-note'); return !!n && !n.hidden && n.textContent.includes('--no-wait') })()`)
	if v := eval[string](t, ctx, `document.querySelector('.composer textarea').value`); v != marker2 {
		t.Errorf("the composer holds %q, not what was typed", v)
	}
	if sent := eval[[]string](t, ctx, `window.__sent`); strings.Contains(strings.Join(sent, "\n"), marker2) {
		t.Errorf("the unconfirmed device sent the marker: %q", sent)
	}
	if found := relayFilesHold(t, r.data, logPath, marker2); len(found) > 0 {
		t.Errorf("the unconfirmed device's marker is in %v", found)
	}
	if found := relayFilesHold(t, r.data, logPath, marker); len(found) > 0 {
		t.Errorf("the marker is in %v", found)
	}
	// The search does find what the relay was given: the session's id.
	if found := relayFilesHold(t, r.data, logPath, id); len(found) == 0 {
		t.Error("the search of the relay's files finds nothing")
	}
}

// For a device paired with a machine, every session shows its protection:
// plaintext sessions (here made by the relay's token, as a relay can make
// them itself) are marked "Not encrypted" in the list and the header; a
// prompt to one is sent only after the person confirms it in the composer
// (the text kept until then), and never to one that says it runs on a
// machine the device paired with (that machine seals: the name is learnt
// from its sealed summaries). A sealed session's header names the machine
// that sealed it and that machine's key fingerprint.
func TestAppMarksPlaintextSessions(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)

	_, sealed := replaySealed(t, r, state)
	kr, err := openKeyring(state)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kr.SealInfo(sealed, json.RawMessage(`{"title":"the sealed one","machine":"laptop","mode":"remote","status":"idle"}`))
	if err != nil {
		t.Fatal(err)
	}
	cli := dialCLI(t, r)
	cli.request(protocol.Frame{Type: protocol.FrameAnnounce, Session: sealed, Info: info})
	const (
		other  = "0b0e0b0e-0000-4000-8000-0000000000b1" // says it runs on a machine the device never paired with
		posing = "0b0e0b0e-0000-4000-8000-0000000000b2" // says it runs on the paired machine
	)
	cli.announce(other, map[string]any{"title": "plain on another box", "machine": "other-box", "mode": "remote", "status": "idle"})
	cli.announce(posing, map[string]any{"title": "plain posing as laptop", "machine": "laptop", "mode": "remote", "status": "idle"})

	must(t, ctx, chromedp.Navigate(r.base+"/#/"), chromedp.Reload())
	row := func(id string) string { return fmt.Sprintf(`document.querySelector('li[data-session=%q]')`, id) }
	waitJS(t, ctx, "the three rows", fmt.Sprintf(`!!%s && !!%s && !!%s && %s.textContent.includes('the sealed one')`, row(sealed), row(other), row(posing), row(sealed)))
	for id, plain := range map[string]bool{sealed: false, other: true, posing: true} {
		if got := eval[bool](t, ctx, row(id)+`.textContent.includes('Not encrypted')`); got != plain {
			t.Errorf("row %s marked not encrypted: %v, want %v", id, got, plain)
		}
	}
	checkAccessible(t, ctx, "the list with its marks")

	// The sealed session's header: encrypted, by laptop, with its fingerprint.
	fp := eval[string](t, ctx, `JSON.parse(localStorage.getItem('ccrelay.machines'))[0].fingerprint`)
	if n := eval[string](t, ctx, `JSON.parse(localStorage.getItem('ccrelay.machines'))[0].name || ''`); n != "laptop" {
		t.Errorf("the paired machine's name learnt: %q", n)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+sealed))
	waitJS(t, ctx, "the sealed header", `!!document.querySelector('.top-sub .chip.e2e')`)
	if title := eval[string](t, ctx, `document.querySelector('.top-sub .chip.e2e').title`); !strings.Contains(title, "laptop") || !strings.Contains(title, fp) {
		t.Errorf("the header's chip says %q (fingerprint %s)", title, fp)
	}
	click(t, ctx, `button[aria-label="Session settings"]`)
	waitJS(t, ctx, "the settings' protection line", fmt.Sprintf(`(document.querySelector('dialog .protection')?.textContent || '').includes(%q)`, fp))
	eval[bool](t, ctx, `document.querySelector('dialog').close() || true`)

	// A plaintext session of another machine: marked, and sent to only
	// once confirmed.
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+other))
	waitJS(t, ctx, "the plaintext header", `(document.querySelector('.top-sub .chip.plain')?.textContent || '') === 'Not encrypted'`)
	waitJS(t, ctx, "the prompt box", `!document.querySelector('.composer textarea').disabled`)
	eval[bool](t, ctx, sentFrames)
	const m1 = "MARKER-plain-confirmed"
	must(t, ctx, typeInto("textarea", m1), chromedp.Click(chromedp.CSS("button.send")))
	waitJS(t, ctx, "the confirmation", `(() => { const n = document.querySelector('.seal-note'); return !!n && !n.hidden && !!n.querySelector('button.send-plain') })()`)
	if note := eval[string](t, ctx, `document.querySelector('.seal-note').textContent`); !strings.Contains(note, "not end-to-end encrypted") {
		t.Errorf("the note says %q", note)
	}
	if v := eval[string](t, ctx, `document.querySelector('.composer textarea').value`); v != m1 {
		t.Errorf("the composer holds %q", v)
	}
	checkAccessible(t, ctx, "the confirmation")
	if sent := eval[[]string](t, ctx, `window.__sent`); strings.Contains(strings.Join(sent, "\n"), m1) {
		t.Fatalf("sent before it was confirmed: %q", sent)
	}
	click(t, ctx, ".seal-note button.send-plain")
	if c := cli.command(protocol.StatusDone, ""); c.Text != m1 || c.Sealed != "" {
		t.Errorf("the CLI got %+v", c)
	}
	waitJS(t, ctx, "the note gone", `document.querySelector('.seal-note').hidden`)

	// One that says it runs on the paired machine: refused, said why.
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+posing))
	waitJS(t, ctx, "the plaintext header", `!!document.querySelector('.top-sub .chip.plain') && !document.querySelector('.composer textarea').disabled`)
	const m2 = "MARKER-plain-posing"
	must(t, ctx, typeInto("textarea", m2), chromedp.Click(chromedp.CSS("button.send")))
	waitJS(t, ctx, "the refusal", `(() => { const n = document.querySelector('.seal-note'); return !!n && !n.hidden })()`)
	note := eval[string](t, ctx, `document.querySelector('.seal-note').textContent`)
	if !strings.Contains(note, "laptop") || !strings.Contains(note, "Not sent") || eval[bool](t, ctx, `!!document.querySelector('.seal-note button.send-plain')`) {
		t.Errorf("the note says %q (a button to send anyway: %v)", note, eval[bool](t, ctx, `!!document.querySelector('.seal-note button.send-plain')`))
	}
	if v := eval[string](t, ctx, `document.querySelector('.composer textarea').value`); v != m2 {
		t.Errorf("the composer holds %q", v)
	}
	if sent := eval[[]string](t, ctx, `window.__sent`); strings.Contains(strings.Join(sent, "\n"), m2) {
		t.Errorf("sent to a session posing as the paired machine: %q", sent)
	}

	// A session announced in plaintext for which the relay hands this
	// device a key (one that does not open): sealed for all the app
	// knows, so it gets no plaintext, not even once confirmed.
	const keyed = "0b0e0b0e-0000-4000-8000-0000000000b3"
	devs := cli.request(protocol.Frame{Type: protocol.FrameDevices}).Devices
	if len(devs) != 1 {
		t.Fatalf("devices %+v", devs)
	}
	cli.request(protocol.Frame{Type: protocol.FrameKeys, Session: keyed, Machine: kr.MachinePublic(),
		Keys: []protocol.WrappedKey{{Device: devs[0].ID, Wrapped: strings.Repeat("A", 151)}}})
	cli.announce(keyed, map[string]any{"title": "plain with a key", "mode": "remote", "status": "idle"})
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+keyed))
	waitJS(t, ctx, "the key that does not open", `ccrelay.skipped.some((s) => s.includes('does not open')) && !document.querySelector('.composer textarea').disabled`)
	const m3 = "MARKER-keyed-plain"
	must(t, ctx, typeInto("textarea", m3), chromedp.Click(chromedp.CSS("button.send")))
	waitJS(t, ctx, "the refusal", `(() => { const n = document.querySelector('.seal-note'); return !!n && !n.hidden })()`)
	if note := eval[string](t, ctx, `document.querySelector('.seal-note').textContent`); !strings.Contains(note, "no key") || eval[bool](t, ctx, `!!document.querySelector('.seal-note button.send-plain')`) {
		t.Errorf("a session with a key that does not open: the note says %q", note)
	}
	if sent := eval[[]string](t, ctx, `window.__sent`); strings.Contains(strings.Join(sent, "\n"), m3) {
		t.Errorf("sent to a session keyed for this device: %q", sent)
	}

	// The relay gone, the page shows the list it saved: the sealed session
	// is still known encrypted (no key in memory now), never taken for a
	// plaintext one; the plaintext ones are still marked.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitAsync(t, ctx, "the list saved", fmt.Sprintf(`import('./js/offline.js').then((m) => m.loadList()).then((l) => !!l && l.sessions.length === 4)`))
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	must(t, ctx, chromedp.Reload())
	waitJS(t, ctx, "the saved list", fmt.Sprintf(`!!document.querySelector('.stale-note:not([hidden])') && !!%s && !!%s`, row(sealed), row(other)))
	if eval[bool](t, ctx, row(sealed)+`.textContent.includes('Not encrypted')`) || !eval[bool](t, ctx, row(other)+`.textContent.includes('Not encrypted')`) {
		t.Errorf("offline, the sealed row says %q, the plaintext one %q", eval[string](t, ctx, row(sealed)+`.textContent`), eval[string](t, ctx, row(other)+`.textContent`))
	}
}

// On a device paired with machines, the notification of a permission
// request of a plaintext session offers no Allow or Deny: what goes to a
// plaintext session is confirmed in the page, which the tap opens.
func TestAppPairedNotificationsAnswerInPage(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	registration := watchWorker(t, ctx, r.base)
	pairBrowser(t, ctx, r)
	const id = "0b0e0b0e-0000-4000-8000-0000000000c1"
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"title": "plain", "mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "make"}, "description": "Build it"},
	}})
	waitJS(t, ctx, "the session listed", fmt.Sprintf(`!!document.querySelector('li[data-session=%q]')`, id))
	waitJS(t, ctx, "the service worker controlling the page", `!!navigator.serviceWorker.controller`)
	waitAsync(t, ctx, "the device known paired to the worker", `import('./js/offline.js').then((m) => m.kvGet('paired')).then((v) => v === true)`)
	shows := followShows(t, ctx, r.base)
	rid := registration()
	if rid == "" {
		t.Fatal("no service worker registration seen")
	}
	if _, err := chromedp.Call(ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: r.base, RegistrationID: rid,
		Data: fmt.Sprintf(`{"session":%q,"kind":"permission","seq":0}`, id)}); err != nil {
		t.Fatalf("deliver push: %v", err)
	}
	tag := "perm:" + id + ":req-1"
	waitShown(t, "the permission notification", shows, tag, 1)
	waitAsync(t, ctx, "the permission notification", fmt.Sprintf(`navigator.serviceWorker.ready.then((r) => r.getNotifications({tag: %q})).then((ns) => ns.length === 1)`, tag))
	desc := evalAwait[string](t, ctx, fmt.Sprintf(`navigator.serviceWorker.ready.then((r) => r.getNotifications({tag: %q})).then(([n]) => n.body + '|' + n.actions.map((a) => a.action).join(','))`, tag))
	if !strings.Contains(desc, "Bash: Build it") || !strings.HasSuffix(desc, "|") {
		t.Errorf("the notification of a plaintext session on a paired device: %q (want no actions)", desc)
	}
}

// A browser that cannot tell a session is sealed (the relay's own token:
// no device key, and a summary that says nothing of sealing) sends its
// prompt in plaintext; the relay, which holds the session's keys, refuses
// it unstored, and the page says so in the composer, with the text kept.
func TestAppShowsRelayRefusalOfPlaintext(t *testing.T) {
	r, logPath := startLoggedAppRelay(t)
	// A device with a key, paired with `ccrelay pair --no-wait`, redeemed
	// here as a phone would.
	res := run(t, "pair", "--no-wait", "--relay", r.base, "--data", r.data, "--state", t.TempDir())
	link := regexp.MustCompile(`#pair=([^.\s]+)\.`).FindStringSubmatch(res.stdout)
	if res.code != 0 || link == nil {
		t.Fatalf("pair --no-wait: %+v", res)
	}
	pub := make([]byte, 32)
	pub[0] = 9
	body, _ := json.Marshal(map[string]any{"code": link[1], "name": "phone", "publicKey": pub, "confirm": make([]byte, 32)})
	resp, err := http.Post(r.base+"/api/pair/redeem", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var redeemed struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&redeemed)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || redeemed.ID == "" {
		t.Fatalf("redeem: %d %+v", resp.StatusCode, redeemed)
	}
	const id = "0b0e0b0e-0000-4000-8000-0000000000d1"
	cli := dialCLI(t, r)
	cli.request(protocol.Frame{Type: protocol.FrameKeys, Session: id, Machine: strings.Repeat("B", 43),
		Keys: []protocol.WrappedKey{{Device: redeemed.ID, Wrapped: strings.Repeat("A", 151)}}})
	cli.announce(id, map[string]any{"title": "keyed on the relay", "mode": "remote", "status": "idle"})

	ctx := newBrowser(t)
	must(t, ctx, phone())
	r.open(t, ctx, id)
	waitJS(t, ctx, "the prompt box", `!document.querySelector('.composer textarea').disabled`)
	eval[bool](t, ctx, sentFrames)
	const marker = "MARKER-relay-refused"
	must(t, ctx, typeInto("textarea", marker), chromedp.Click(chromedp.CSS("button.send")))
	waitJS(t, ctx, "the relay's refusal in the composer", `(() => { const n = document.querySelector('.seal-note'); return !!n && !n.hidden && n.textContent.includes('end-to-end encrypted') })()`)
	if v := eval[string](t, ctx, `document.querySelector('.composer textarea').value`); v != marker {
		t.Errorf("the composer holds %q", v)
	}
	if eval[bool](t, ctx, `!!document.querySelector('.pending-msg')`) {
		t.Error("the prompt is still shown as pending")
	}
	if sent := eval[[]string](t, ctx, `window.__sent`); !strings.Contains(strings.Join(sent, "\n"), marker) {
		t.Fatalf("the page did not send the prompt (the relay's refusal is not what this shows): %q", sent)
	}
	if found := relayFilesHold(t, r.data, logPath, marker); len(found) > 0 {
		t.Errorf("the marker is in %v", found)
	}
}
