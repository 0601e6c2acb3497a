package main

// The installable app in headless Chromium: the service worker registers,
// a push is written as a notification that opens the session (at the
// request) and answers a permission from its Allow action, and with the
// relay stopped the app shell loads and the sessions read before are
// readable, said to be stale. And serve's ntfy posts.

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/push"
	"github.com/ccrelay/ccrelay/relay"
)

// waitAsync polls a JavaScript promise of a boolean until it is true.
func waitAsync(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr, chromedp.EvalAwaitPromise))
		if err == nil && v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last error %v); page says:\n%s", what, err, eval[string](t, ctx, `document.body.innerText.slice(0, 2000)`))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type grantParams struct {
	Permissions []string `json:"permissions"`
	Origin      string   `json:"origin,omitempty"`
}

var grantPermissions = cdp.Command[grantParams, cdp.Empty]{Method: "Browser.grantPermissions"}

// watchWorker grants the page at base notifications and follows its
// service worker: the function returns the worker's registration id, for
// delivering pushes ("" before the worker registered).
func watchWorker(t *testing.T, ctx context.Context, base string) func() serviceworker.RegistrationID {
	t.Helper()
	if _, err := chromedp.CallBrowser(ctx, grantPermissions, grantParams{Permissions: []string{"notifications"}, Origin: base}); err != nil {
		t.Fatalf("grant notifications: %v", err)
	}
	var mu sync.Mutex
	var reg serviceworker.RegistrationID
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*serviceworker.EventWorkerRegistrationUpdated); ok {
			mu.Lock()
			for _, rg := range e.Registrations {
				if !rg.IsDeleted && strings.HasPrefix(rg.ScopeURL, base) {
					reg = rg.RegistrationID
				}
			}
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, serviceworker.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return func() serviceworker.RegistrationID {
		mu.Lock()
		defer mu.Unlock()
		return reg
	}
}

// followShows attaches to the service worker of the page at base and
// returns how many notifications it has shown with a tag, counted when its
// showNotification settles. A test waits on this count before it reads a
// notification with getNotifications: Chromium deletes a notification that
// a getNotifications call overlaps while it is being shown (the read finds
// it stored but not yet on display, and drops it as closed), so polling
// getNotifications while the worker handles a push lost the notification
// (TestAppInstallableOfflineNotifications, 3 of 18 runs under load, each
// time after the worker had shown it). DevTools attached keeps the worker
// running, so the count is not lost with it.
func followShows(t *testing.T, ctx context.Context, base string) func(tag string) int {
	t.Helper()
	sw := workerContext(t, ctx, base)
	if _, err := chromedp.Run(sw, chromedp.Evaluate[bool](`(() => {
		if (self.shownTags) return true;
		self.shownTags = [];
		const show = ServiceWorkerRegistration.prototype.showNotification;
		ServiceWorkerRegistration.prototype.showNotification = function (title, options) {
			return show.call(this, title, options).then((r) => { shownTags.push(options?.tag ?? ''); return r; });
		};
		return true; })()`)); err != nil {
		t.Fatalf("follow the service worker: %v", err)
	}
	return func(tag string) int {
		t.Helper()
		n, err := chromedp.Run(sw, chromedp.Evaluate[int](fmt.Sprintf(`shownTags.filter((t) => t === %q).length`, tag)))
		if err != nil {
			t.Fatalf("the service worker's notifications: %v", err)
		}
		return n
	}
}

// workerContext attaches to the service worker of the app at base: a
// context that evaluates in the worker.
func workerContext(t *testing.T, ctx context.Context, base string) context.Context {
	t.Helper()
	var id target.ID
	for deadline := time.Now().Add(30 * time.Second); id == ""; {
		tis, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("list targets: %v", err)
		}
		for _, ti := range tis {
			if ti.Type == "service_worker" && strings.HasPrefix(ti.URL, base+"/") {
				id = ti.TargetID
			}
		}
		if id == "" {
			if time.Now().After(deadline) {
				t.Fatal("no service worker to follow")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	sw, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id), chromedp.WithDetachOnCancel())
	t.Cleanup(cancel)
	return sw
}

// waitShown waits until the worker followed by shows has shown n
// notifications tagged tag.
func waitShown(t *testing.T, what string, shows func(string) int, tag string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for shows(tag) < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the service worker to show %s (%d shown, want %d)", what, shows(tag), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAppInstallableOfflineNotifications(t *testing.T) {
	r := startAppRelay(t)
	id, envs := r.replay(t, corpus+smallSession)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	registration := watchWorker(t, ctx, r.base)

	r.open(t, ctx, id)
	waitJS(t, ctx, "the service worker controlling the page", `!!navigator.serviceWorker.controller`)
	shows := followShows(t, ctx, r.base)
	waitAsync(t, ctx, "the session kept for offline reading", fmt.Sprintf(
		`import('./js/offline.js').then((m) => m.savedSessions()).then((l) => l.some((s) => s.id === %q && s.last === %d))`, id, len(envs)))
	rows := eval[int](t, ctx, `document.querySelectorAll('.blocks > *').length`)

	// The page tells the relay what it shows, with this device's id.
	eval[bool](t, ctx, `(() => { window.sentFrames = []; const send = WebSocket.prototype.send; WebSocket.prototype.send = function (d) { sentFrames.push(JSON.parse(d)); return send.call(this, d); }; return true; })()`)
	must(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	waitJS(t, ctx, "visibility sent for the list", `sentFrames.some((f) => f.type === 'visibility' && f.session === '' && f.visible === true && f.device === ccrelay.device)`)
	must(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/s/%s'`, id)))
	waitJS(t, ctx, "visibility sent for the session", fmt.Sprintf(`sentFrames.some((f) => f.type === 'visibility' && f.session === %q && f.visible === true)`, id))
	waitJS(t, ctx, "the session rendered again", fmt.Sprintf(`document.body.dataset.rendered === %q`, id))
	if dev := eval[string](t, ctx, `ccrelay.device`); len(dev) < 16 || dev != eval[string](t, ctx, `localStorage.getItem('ccrelay.push-device')`) {
		t.Errorf("device id %q not kept", dev)
	}

	deliver := func(kind string) {
		t.Helper()
		rid := registration()
		if rid == "" {
			t.Fatal("no service worker registration seen")
		}
		data := fmt.Sprintf(`{"session":%q,"kind":%q,"seq":%d}`, id, kind, len(envs))
		if _, err := chromedp.Call(ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: r.base, RegistrationID: rid, Data: data}); err != nil {
			t.Fatalf("deliver push: %v", err)
		}
	}
	notification := func(tag string) string {
		return fmt.Sprintf(`navigator.serviceWorker.ready.then((r) => r.getNotifications({tag: %q})).then((ns) => ns.length === 1)`, tag)
	}
	notificationClick := func(tag, action string) {
		t.Helper()
		eval[bool](t, ctx, fmt.Sprintf(`navigator.serviceWorker.controller.postMessage({type: 'notification-click', tag: %q, action: %q}), true`, tag, action))
	}

	// A turn that finished: the text says which session.
	deliver("turn")
	waitShown(t, "the turn notification", shows, "turn:"+id, 1)
	waitAsync(t, ctx, "the turn notification", notification("turn:"+id))

	// A permission request: its notification has Allow and Deny; a tap
	// opens the session at the request.
	cli := dialCLI(t, r)
	cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
		{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "make"}, "description": "Build it"},
	}})
	deliver("permission")
	tag := "perm:" + id + ":req-1"
	waitShown(t, "the permission notification", shows, tag, 1)
	waitAsync(t, ctx, "the permission notification", notification(tag))
	desc, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`navigator.serviceWorker.ready.then((r) => r.getNotifications({tag: %q})).then(([n]) => n.title + '|' + n.body + '|' + n.actions.map((a) => a.action).join(','))`, tag), chromedp.EvalAwaitPromise))
	if err != nil || !strings.Contains(desc, "Bash: Build it") || !strings.HasSuffix(desc, "|allow,deny") {
		t.Fatalf("permission notification %q %v", desc, err)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	waitJS(t, ctx, "the list", fmt.Sprintf(`!!document.querySelector('li[data-session=%q]')`, id))
	notificationClick(tag, "")
	waitJS(t, ctx, "the session opened at the request", fmt.Sprintf(`document.body.dataset.rendered === %q && location.hash.includes('request=req-1') && !!document.querySelector('.perm.focus[data-request="req-1"]')`, id))
	waitAsync(t, ctx, "the clicked notification closed", strings.Replace(notification(tag), "=== 1", "=== 0", 1))

	// Allow, from the notification: the CLI gets the answer.
	deliver("permission")
	waitShown(t, "the permission notification again", shows, tag, 2)
	waitAsync(t, ctx, "the permission notification again", notification(tag))
	notificationClick(tag, "allow")
	if c := cli.command(protocol.StatusDone, ""); c.Kind != protocol.CommandPermission || c.RequestID != "req-1" || !c.Allow {
		t.Fatalf("answer from the notification: %+v", c)
	}

	// The notification settings: this device subscribes with the kinds it
	// chose (the browser's push service is stood in for: headless Chromium
	// has none), and unsubscribes.
	must(t, ctx, chromedp.Navigate(r.base+"/#/"))
	eval[bool](t, ctx, `(() => {
		PushManager.prototype.getSubscription = async () => null;
		PushManager.prototype.subscribe = async (opts) => {
			window.subscribedWith = opts;
			return { toJSON: () => ({ endpoint: 'https://push.example.net/sub/1', keys: {
				p256dh: 'BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4', auth: 'BTBZMqHH6r4Tts7J_aSIgg' } }),
				unsubscribe: async () => true };
		};
		return true;
	})()`)
	sheetSays := func(what string) string {
		return fmt.Sprintf(`(document.querySelector('.notify-sheet [role=status]')?.textContent || '') === %q`, what)
	}
	click(t, ctx, `button[aria-label="Notifications"]`)
	waitJS(t, ctx, "the sheet, off", sheetSays("Off for this device."))
	if n := eval[int](t, ctx, `document.querySelectorAll('.notify-sheet input[type=checkbox]:checked').length`); n != 4 {
		t.Fatalf("%d kinds offered checked, want 4", n)
	}
	must(t, ctx, chromedp.Click(chromedp.CSS(`.notify-sheet input[name=agent]`)), chromedp.Click(chromedp.CSS(`.notify-sheet button.primary`)))
	waitJS(t, ctx, "the sheet, on", sheetSays("On for this device."))
	if !eval[bool](t, ctx, `subscribedWith.userVisibleOnly === true && subscribedWith.applicationServerKey.length === 65`) {
		t.Error("subscribed without the relay's key")
	}
	device := eval[string](t, ctx, `ccrelay.device`)
	subscription := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, r.base+"/push/subscription?device="+device, nil)
		req.Header.Set("Authorization", "Bearer "+r.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, strings.TrimSpace(string(b))
	}
	if code, b := subscription(); code != http.StatusOK || b != `{"kinds":["permission","turn","failed"]}` {
		t.Errorf("the device's subscription: %d %s", code, b)
	}
	click(t, ctx, `.notify-sheet button.wide:not(.primary):not([value])`)
	waitJS(t, ctx, "the sheet, off again", sheetSays("Off for this device."))
	if code, _ := subscription(); code != http.StatusNotFound {
		t.Errorf("after turning off: %d", code)
	}

	// The relay stops: the app shell loads from the service worker, the
	// session read before is readable and said to be stale.
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.cmd.Wait()
	must(t, ctx, chromedp.Navigate(r.base+"/#/s/"+id), chromedp.Reload())
	waitJS(t, ctx, "the saved copy shown", fmt.Sprintf(`document.body.dataset.offlineCopy === %q && document.body.dataset.rendered === %q`, id, id))
	waitJS(t, ctx, "said to be stale", `(() => { const n = document.querySelector('.stale-note'); return !!n && !n.hidden && n.textContent.includes('stale since'); })()`)
	if got := eval[int](t, ctx, `document.querySelectorAll('.blocks > *').length`); got != rows {
		t.Errorf("offline copy shows %d blocks, the session had %d", got, rows)
	}
	must(t, ctx, chromedp.Navigate(r.base+"/#/"), chromedp.Reload())
	waitJS(t, ctx, "the saved list, stale", fmt.Sprintf(`!!document.querySelector('li[data-session=%q]') && !document.querySelector('.stale-note').hidden`, id))

	// Sessions kept offline are bounded by size: the least recently saved
	// go first (the session read above, then a, until b alone fits).
	waitAsync(t, ctx, "older copies dropped past the bound", fmt.Sprintf(`import('./js/offline.js').then(async (m) => {
		const a = '00000000-0000-4000-8000-00000000000a', b = '00000000-0000-4000-8000-00000000000b';
		const env = (n) => ({ id: 'c' + n, time: 1, role: 'user', ev: { t: 'text', text: 'x'.repeat(1000) } });
		await m.saveItems(a, { id: a }, [1, 2, 3].map((seq) => ({ seq, envelope: env(seq) })));
		await new Promise((r) => setTimeout(r, 5));
		await m.saveItems(b, { id: b }, [1, 2].map((seq) => ({ seq, envelope: env(seq) })));
		const before = await m.savedSessions();
		const bytes = (id) => before.find((s) => s.id === id).bytes;
		await m.evictTo(bytes(b));
		const after = (await m.savedSessions()).map((s) => s.id);
		return before.length === 3 && before.some((s) => s.id === %q) && after.length === 1 && after[0] === b;
	})`, id))
}

// --notify-ntfy: each event is posted to the topic with a generic text and
// a link to the session, never the session's content. The link starts with
// the public URL when one is given (--public-url), else with the address
// the relay listens on.
func TestServeNtfy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
		link  string // "" for the address listened on
	}{
		{"no public URL", nil, ""},
		{"public URL", []string{"--public-url", "https://relay.example.com"}, "https://relay.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type post struct{ body, click string }
			posts := make(chan post, 16)
			ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if r.URL.Path == "/ccrelay-test" {
					posts <- post{string(b), r.Header.Get("Click")}
				}
			}))
			defer ntfy.Close()
			data := t.TempDir()
			cmd, base, token := startServe(t, data, append([]string{"--notify-ntfy", ntfy.URL + "/ccrelay-test"}, tc.extra...)...)
			t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
			r := &appRelay{data: data, base: base, token: token, cmd: cmd}
			id, _ := r.replay(t, corpus+smallSession)
			cli := dialCLI(t, r)
			cli.announce(id, map[string]any{"mode": "remote", "status": "waiting-for-permission", "permissions": []map[string]any{
				{"id": "req-1", "tool": "Bash", "input": map[string]any{"command": "cat secret.txt"}, "description": "Read the secret"},
			}})
			link := tc.link
			if link == "" {
				link = base
			}
			select {
			case p := <-posts:
				if p.body != "Claude is waiting for your permission" || p.click != link+"/#/s/"+id {
					t.Errorf("ntfy post %+v, want the link %s/#/s/%s", p, link, id)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("nothing posted to ntfy")
			}
			// The VAPID key pair is in the store (shared by relays on one
			// database), not in a file of the data folder.
			if _, err := os.Stat(filepath.Join(data, push.KeyFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("vapid key file: %v, want none", err)
			}
			if key := storedVAPIDKey(t, data); key != pushKey(t, base, token) {
				t.Errorf("the stored VAPID key %q is not the one /push/key gives", key)
			}
		})
	}
}

// storedVAPIDKey is the public half of the VAPID key pair the relay's
// store in data holds.
func storedVAPIDKey(t *testing.T, data string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, relay.StoreFile)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pem string
	if err := db.QueryRow(`SELECT value FROM relay_keys WHERE name = 'vapid'`).Scan(&pem); err != nil {
		t.Fatalf("the store's VAPID key: %v", err)
	}
	k, err := push.ParseKeys([]byte(pem))
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

// pushKey is the VAPID public key the relay at base gives apps.
func pushKey(t *testing.T, base, token string) string {
	t.Helper()
	code, body := pushRequest(t, base, token, http.MethodGet, "/push/key", nil)
	var k struct{ PublicKey string }
	if code != http.StatusOK || json.Unmarshal(body, &k) != nil {
		t.Fatalf("/push/key: %d %s", code, body)
	}
	return k.PublicKey
}

func pushRequest(t *testing.T, base, token, method, path string, body []byte) (int, []byte) {
	t.Helper()
	return testutil.Request(t, method, base+path, token, body)
}

// A data folder of an older relay, with its VAPID key file and push.json:
// serve moves both into the store, so its devices stay subscribed and
// their subscriptions keep verifying; push.json is renamed, vapid.pem no
// longer read.
func TestServeImportsOlderPushFiles(t *testing.T) {
	data := t.TempDir()
	keys, err := push.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	pemKey, _ := push.MarshalKeys(keys)
	if err := os.WriteFile(filepath.Join(data, push.KeyFile), pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	// The first start takes the key file; the relay's token is made then.
	cmd, base, token := startServe(t, data)
	if got := pushKey(t, base, token); got != keys.PublicKey() {
		t.Fatalf("/push/key %q, want the key file's", got)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	// An older relay's subscriptions: by owner (the token's default
	// account), then device.
	const device = "device-phone-0123456789"
	phone, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	legacy := fmt.Sprintf(`{%q:{%q:{"subscription":{"endpoint":"https://push.example.net/phone","keys":{"p256dh":%q,"auth":%q}},"kinds":["turn"],"updated":1}}}`,
		relay.OwnerID(token), device, base64.RawURLEncoding.EncodeToString(phone.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(make([]byte, 16)))
	if err := os.WriteFile(filepath.Join(data, relay.PushFile), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, base, token = startServe(t, data)
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	if got := pushKey(t, base, token); got != keys.PublicKey() {
		t.Fatalf("/push/key %q after a restart, want the key file's", got)
	}
	if code, body := pushRequest(t, base, token, http.MethodGet, "/push/subscription?device="+device, nil); code != http.StatusOK || !strings.Contains(string(body), `"kinds":["turn"]`) {
		t.Fatalf("the imported subscription: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(data, relay.PushFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("push.json after the import: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, relay.PushFile+".imported")); err != nil {
		t.Errorf("push.json.imported: %v", err)
	}
}
