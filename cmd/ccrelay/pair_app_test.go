package main

import (
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/protocol"
)

// A phone pairs over HTTPS: the relay serves a certificate of a CA made in
// the test (Chromium trusts it by its key's SPKI hash); `ccrelay pair`
// prints the link; opening it at phone size pairs the device (the code
// leaves the address bar at once), the sessions show, the device knows its
// name, and a prompt typed in the page reaches the CLI.
func TestAppPairsOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certFile, keyFile, spki := ca.issue(t, dir, "relay", 7)
	caFile := filepath.Join(dir, "ca.pem")
	writeFile(t, caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	data := filepath.Join(dir, "data")
	_, base, token := startServeTLS(t, data, "--tls-cert", certFile, "--tls-key", keyFile)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}

	// A machine (here the relay token's) with a session.
	cli := dialCLIWith(t, base, token, client)
	const id = "5e55a001-0000-4000-8000-0000000000aa"
	cli.announce(id, map[string]any{"cwd": "/home/dev/project", "machine": "laptop", "mode": "local", "status": "idle"})
	cli.envelopes(id, turn("h1", "fix the login page", "Fixed.")...)

	start := time.Now()
	pair := exec.Command(binary, "pair", "--no-wait", "--relay", base, "--data", data, "--state", t.TempDir())
	pair.Env = append(os.Environ(), "SSL_CERT_FILE="+caFile)
	out, err := pair.CombinedOutput()
	if err != nil {
		t.Fatalf("pair: %v\n%s", err, out)
	}
	link := regexp.MustCompile(`open:\s+(https://\S+#pair=\S+)`).FindStringSubmatch(string(out))
	if link == nil {
		t.Fatalf("no https link in %s", out)
	}

	ctx := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", spki))
	must(t, ctx, phone(), chromedp.Navigate(link[1]))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	if href := eval[string](t, ctx, `location.href`); strings.Contains(href, "pair=") {
		t.Errorf("the code stays in the address bar: %s", href)
	}
	if eval[bool](t, ctx, `window.isSecureContext && !!crypto.subtle`) != true {
		t.Error("not a secure context: no WebCrypto")
	}
	must(t, ctx, chromedp.SetValue(chromedp.CSS("input.pair-name"), "Test phone"), chromedp.Click(chromedp.CSS(".pair-form button")))
	row := chromedp.CSS(`li[data-session="` + id + `"] a`)
	must(t, ctx, chromedp.WaitVisible(row))
	t.Logf("from `ccrelay pair` to the phone listing the sessions: %v", time.Since(start).Round(time.Millisecond))
	waitJS(t, ctx, "this device's name", `document.querySelector('.device-name')?.textContent === 'Test phone' && document.querySelector('.device-bar').dataset.role === 'device'`)
	if cred := eval[string](t, ctx, `localStorage.getItem('ccrelay.token')`); !strings.HasPrefix(cred, "ccr_") {
		t.Errorf("stored credential %.8q… is not a device credential", cred)
	}
	if eval[bool](t, ctx, `!!document.querySelector('.device-signout')`) != true {
		t.Error("no sign-out button")
	}
	screenshot(t, ctx, "paired-phone")

	must(t, ctx, chromedp.Click(row))
	waitJS(t, ctx, "the session rendered", `document.body.dataset.rendered === "`+id+`"`)
	must(t, ctx, typeInto("textarea", "run the tests"), chromedp.Click(chromedp.CSS("button.send")))
	// The session is not encrypted (its machine trusts no device): the
	// paired phone sends to it once the person confirms.
	waitJS(t, ctx, "the confirmation", `!!document.querySelector('.seal-note:not([hidden]) button.send-plain')`)
	click(t, ctx, ".seal-note button.send-plain")
	if c := cli.command(protocol.StatusDone, ""); c.Kind != protocol.CommandPrompt || c.Text != "run the tests" {
		t.Fatalf("command %+v", c)
	}
	// The phone is a device of the relay now.
	req, _ := http.NewRequest("GET", base+"/api/devices", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	resp.Body.Close()
	if !strings.Contains(string(b[:n]), `"name":"Test phone"`) {
		t.Errorf("devices: %s", b[:n])
	}
}
