package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// recipeBlocks are the ```sh blocks of docs/deploy.md's section headed
// heading, in order, their indentation removed.
func recipeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/deploy.md has no section %q", heading)
	}
	section := doc[i+len(heading)+2:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(section, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```sh":
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, strings.TrimPrefix(line, "   "))
		}
	}
	return blocks
}

// needOpenSSL finds openssl, which the LAN recipe uses; CI must have it.
func needOpenSSL(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no openssl: CI must have it for the LAN recipe")
		}
		t.Skip("no openssl on PATH")
	}
}

// docs/deploy.md's LAN recipe, followed as written (only the LAN address
// and the port changed), from a fresh HOME with ccrelay and Claude Code
// (the fake) on PATH: openssl makes the authority and a certificate for
// the LAN address and 127.0.0.1; serve runs at the LAN address; pair at
// https://127.0.0.1 with --ca pairs the phone (Chromium trusting the
// certificate) at the LAN address and remembers the relay and the CA; then
// plain ccrelay, with no flag and no SSL_CERT_FILE, relays a session the
// phone shows.
func TestDeployLANRecipe(t *testing.T) {
	needOpenSSL(t)
	claudeBin := buildFakeClaude(t)
	blocks := recipeBlocks(t, "## On the LAN with your own certificate")
	if len(blocks) != 4 {
		t.Fatalf("the LAN recipe has %d sh blocks, want 4 (certificates, serve, pair, ccrelay):\n%q", len(blocks), blocks)
	}
	r := newSetupRig(t, "")
	for name, target := range map[string]string{"ccrelay": binary, "claude": claudeBin} {
		if err := os.Symlink(target, filepath.Join(r.bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	addr, _ := testLANAddress(t)
	port := strconv.Itoa(r.port)
	sub := strings.NewReplacer("192.168.1.9", addr, "8707", port)
	work := filepath.Join(r.home, "certs")
	os.MkdirAll(work, 0o700)
	shell := func(block string) *exec.Cmd {
		cmd := exec.Command("bash", "-e", "-c", sub.Replace(block))
		cmd.Dir = work
		cmd.Env = r.env
		return cmd
	}

	// 1. The authority and the certificate.
	if out, err := shell(blocks[0]).CombinedOutput(); err != nil {
		t.Fatalf("the certificate block: %v\n%s", err, out)
	}
	// 3. The relay.
	serve := shell("exec " + blocks[1])
	serveRun := startRun(t, serve)
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGTERM)
		serveRun.wait(t, 30*time.Second)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve does not listen:\n%s", serveRun.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// 4. Pairing, the phone trusting the authority.
	pair := startRun(t, shell(blocks[2]))
	link := pair.waitFor(t, pairLinkRe, time.Minute)[1]
	if want := "https://" + net.JoinHostPort(addr, port) + "/#pair="; !strings.HasPrefix(link, want) {
		t.Errorf("the link %s is not on the LAN address (%s)", link, want)
	}
	ctx := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", spkiOf(t, filepath.Join(work, "laptop.crt"))))
	must(t, ctx, phone(), chromedp.Navigate(link))
	waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
	must(t, ctx, chromedp.Click(chromedp.CSS(".pair-form button")))
	if err := pair.wait(t, time.Minute); err != nil || !strings.Contains(pair.output(), "its key is confirmed") {
		t.Fatalf("pair: %v\n%s", err, pair.output())
	}
	// 5. Plain ccrelay.
	b, _ := json.Marshal(map[string]any{"lines": []string{
		`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","message":{"role":"user","content":"over the LAN"}}`,
	}})
	script := filepath.Join(r.home, "script.json")
	writeFile(t, script, b)
	cli := shell(blocks[3])
	cli.Dir = r.home
	cli.Env = append(cli.Env, "FAKE_CLAUDE_SCRIPT="+script)
	if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "relaying to https://127.0.0.1:"+port) {
		t.Fatalf("ccrelay: %v\n%s", err, out)
	}
	waitJS(t, ctx, "the session on the phone", `!!document.querySelector('li[data-session] a')`)
	id := eval[string](t, ctx, `document.querySelector('li[data-session]').dataset.session`)
	must(t, ctx, chromedp.Click(chromedp.CSS(`li[data-session="`+id+`"] a`)))
	waitJS(t, ctx, "the session's prompt", `document.body.dataset.rendered === "`+id+`" && document.body.innerText.includes("over the LAN")`)
}
