package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tailnetServe stands in for tailscale serve: HTTPS for name (a
// certificate of a CA made here) in front of the relay at target, adding
// X-Forwarded-For, -Host and -Proto as tailscale serve does. It returns its
// address and the SPKI hash Chromium is told to trust (the phone trusting
// the tailnet's certificate).
func tailnetServe(t *testing.T, name, target string) (addr, spki string) {
	t.Helper()
	der, key, spki := newTestCA(t).leaf(t, 2, []string{name}, nil)
	u, _ := url.Parse(target)
	srv := httptest.NewUnstartedServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.SetXForwarded()
	}})
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), spki
}

// The newcomer's path, as the issue asks it of CI: a fresh HOME, tailscale
// installed and logged in (a fake one on PATH), Claude Code on PATH (the
// project's fake). The person runs ccrelay setup, opens its pairing link
// on the phone (headless Chromium, reaching the tailnet name) and taps
// Pair, then runs plain ccrelay -p hello with no flag; the phone shows the
// session, sealed for it. The test counts the person's steps (at most 3)
// and times the whole path, compile excluded (at most 60 s), and logs both.
// setup gets --port only to keep off the default port other tests and
// programs of this machine may hold.
func TestNewcomerSetupToPhone(t *testing.T) {
	claudeBin := buildFakeClaude(t)
	r := newSetupRig(t, tsRunning)
	if err := os.Symlink(claudeBin, filepath.Join(r.bin, "claude")); err != nil {
		t.Fatal(err)
	}
	const answer = "Hello! What shall we work on?"
	now := time.Now().UTC()
	lines := []string{
		`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"` + now.Format(time.RFC3339Nano) + `","message":{"role":"user","content":"hello"}}`,
		`{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"{{session}}","timestamp":"` + now.Add(time.Second).Format(time.RFC3339Nano) + `","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"` + answer + `"}]}}`,
	}
	b, _ := json.Marshal(map[string]any{"lines": lines})
	script := filepath.Join(t.TempDir(), "script.json")
	writeFile(t, script, b)
	project := filepath.Join(r.home, "project")
	os.MkdirAll(project, 0o700)

	const tailnetName = "laptop.tail1234.ts.net"
	proxy, spki := tailnetServe(t, tailnetName, loopbackURL("http", r.port))
	ctx := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", spki),
		chromedp.Flag("host-resolver-rules", "MAP "+tailnetName+":443 "+proxy))

	var steps []string
	start := time.Now()
	step := func(what string) {
		steps = append(steps, what)
		t.Logf("step %d at %v: %s", len(steps), time.Since(start).Round(time.Millisecond), what)
	}

	step("ccrelay setup")
	s := r.startSetup(t)
	link := s.waitFor(t, pairLinkRe, time.Minute)[1]

	step("scan the QR code on the phone and tap Pair")
	must(t, ctx, phone(), chromedp.Navigate(link))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	click(t, ctx, ".pair-form button")
	if err := s.wait(t, time.Minute); err != nil {
		t.Fatalf("setup: %v\n%s", err, s.output())
	}
	if out := s.output(); !strings.Contains(out, "its key is confirmed") || !strings.Contains(out, "\n  ccrelay\n") {
		t.Fatalf("setup did not end paired with the line to run:\n%s", out)
	}

	step("ccrelay -p hello")
	cli := exec.Command(binary, "-p", "hello")
	cli.Dir = project
	cli.Env = append(r.env, "FAKE_CLAUDE_SCRIPT="+script)
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("ccrelay -p hello: %v\n%s", err, out)
	}

	waitJS(t, ctx, "the session in the list", `!!document.querySelector('li[data-session] a')`)
	id := eval[string](t, ctx, `document.querySelector('li[data-session]').dataset.session`)
	click(t, ctx, `li[data-session="`+id+`"] a`)
	waitJS(t, ctx, "the session's turn, opened on the phone", `document.body.dataset.rendered === "`+id+`" && document.body.innerText.includes("hello") && document.body.innerText.includes(`+jsString(answer)+`)`)
	elapsed := time.Since(start)
	if !eval[bool](t, ctx, `!!document.querySelector('.chip.e2e')`) {
		t.Error("the session is not shown as end-to-end encrypted")
	}
	screenshot(t, ctx, "newcomer-phone")

	t.Logf("newcomer: %d steps (%s), %v from ccrelay setup to the phone showing the session (compile excluded)", len(steps), strings.Join(steps, "; "), elapsed.Round(time.Millisecond))
	if len(steps) > 3 {
		t.Errorf("%d steps, want at most 3", len(steps))
	}
	if elapsed > time.Minute {
		t.Errorf("%v, want at most 60 s", elapsed)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
