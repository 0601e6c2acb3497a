package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/internal/config"
)

// recipeBlocks are the ```sh blocks of docs/deploy.md's section headed
// heading, in order, their indentation removed.
func recipeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	return docBlocks(t, heading, "sh")
}

// docBlocks are the ```lang blocks of docs/deploy.md's section headed
// heading, in order, their indentation removed.
func docBlocks(t *testing.T, heading, lang string) []string {
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
		case !in && trimmed == "```"+lang:
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

// loginLineRe is the line ccrelay pair --machine prints for the other
// machine; its match is the code.
var loginLineRe = regexp.MustCompile(`(?m)^\s*ccrelay login \S+ (\S+)\s*$`)

// followRecipe runs the sh blocks of docs/deploy.md's section heading as
// written, with sub's changes only (the address and the port, to keep off
// other tests' port), in a fresh HOME (r) with ccrelay and Claude Code
// (the fake) on PATH, each changed by r.wrap if set: a ccrelay serve
// block runs in the background until it listens on r.port (or
// r.listenAt); a ccrelay pair --machine block runs to its end, and the
// code it prints replaces CODE in a ccrelay login block that follows; a
// ccrelay pair block in the background until the
// phone (Chromium with flags) opens its link, which must begin with
// wantLink, taps Pair, and pair confirms its key; a block of plain
// ccrelay runs a session, which the phone must then show; any other block
// runs to its end. It returns the folder the blocks ran in.
func followRecipe(t *testing.T, r *setupRig, heading string, sub *strings.Replacer, wantLink string, want int, flags ...func(work string) chromedp.ExecAllocatorOption) string {
	t.Helper()
	blocks := recipeBlocks(t, heading)
	if len(blocks) != want {
		t.Fatalf("%s has %d sh blocks, want %d:\n%q", heading, len(blocks), want, blocks)
	}
	return followBlocks(t, r, heading, blocks, sub, wantLink, flags...)
}

// followBlocks is followRecipe for blocks (of the recipe named name); a
// caddy run block also runs in the background, until it shows a
// certificate for r.proxyName at r.proxyAt.
func followBlocks(t *testing.T, r *setupRig, name string, blocks []string, sub *strings.Replacer, wantLink string, flags ...func(work string) chromedp.ExecAllocatorOption) string {
	t.Helper()
	claudeBin := buildFakeClaude(t)
	for name, target := range map[string]string{"ccrelay": binary, "claude": claudeBin} {
		if err := os.Symlink(target, filepath.Join(r.bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	port := strconv.Itoa(r.port)
	work := filepath.Join(r.home, "work")
	os.MkdirAll(work, 0o700)
	shell := func(block string) *exec.Cmd {
		cmd := exec.Command("bash", "-e", "-c", sub.Replace(block))
		cmd.Dir = work
		cmd.Env = r.env
		if r.wrap != nil {
			cmd = r.wrap(cmd)
		}
		return cmd
	}
	listenAt := r.listenAt
	if listenAt == "" {
		listenAt = net.JoinHostPort("127.0.0.1", port)
	}
	var ctx context.Context
	var loginCode string // what a ccrelay pair --machine block printed
	background := func(block, at string) {
		server := shell("exec " + block)
		run := startRun(t, server)
		t.Cleanup(func() {
			server.Process.Signal(syscall.SIGTERM)
			run.wait(t, 30*time.Second)
		})
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := net.Dial("tcp", at)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not listen on %s:\n%s", block, at, run.output())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, block := range blocks {
		switch first := strings.TrimSpace(block); {
		case strings.HasPrefix(first, "ccrelay serve"):
			background(block, listenAt)
		case strings.HasPrefix(first, "caddy run"):
			background(block, r.proxyAt)
			// Caddy listens before it has the certificate: the recipe's
			// next steps are for once it has.
			deadline := time.Now().Add(time.Minute)
			for {
				c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", r.proxyAt, &tls.Config{ServerName: r.proxyName, InsecureSkipVerify: true})
				if err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("caddy has no certificate for %s at %s: %v", r.proxyName, r.proxyAt, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		case strings.HasPrefix(first, "ccrelay pair --machine"):
			out, err := shell(block).CombinedOutput()
			m := loginLineRe.FindStringSubmatch(string(out))
			if err != nil || m == nil {
				t.Fatalf("%s: %v\n%s", block, err, out)
			}
			loginCode = m[1]
		case strings.HasPrefix(first, "ccrelay login"):
			if loginCode == "" || !strings.Contains(block, " CODE") {
				t.Fatalf("%s: no code printed before, or no CODE in the line", block)
			}
			if out, err := shell(strings.Replace(block, " CODE", " "+loginCode, 1)).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", block, err, out)
			}
		case strings.HasPrefix(first, "ccrelay pair"):
			pair := startRun(t, shell(block))
			link := pair.waitFor(t, pairLinkRe, time.Minute)[1]
			if !strings.HasPrefix(link, wantLink) {
				t.Errorf("the link %s does not begin with %s", link, wantLink)
			}
			var opts []chromedp.ExecAllocatorOption
			for _, f := range flags {
				opts = append(opts, f(work))
			}
			ctx = newBrowser(t, opts...)
			must(t, ctx, phone(), chromedp.Navigate(link))
			waitJS(t, ctx, "the pairing page", `!!document.querySelector('.pair-form')`)
			click(t, ctx, ".pair-form button")
			if err := pair.wait(t, time.Minute); err != nil || !strings.Contains(pair.output(), "its key is confirmed") {
				t.Fatalf("pair: %v\n%s", err, pair.output())
			}
		case first == "ccrelay":
			if ctx == nil {
				t.Fatal("plain ccrelay before pairing")
			}
			prompt := "a session from " + name
			b, _ := json.Marshal(map[string]any{"lines": []string{
				`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","message":{"role":"user","content":` + jsString(prompt) + `}}`,
			}})
			script := filepath.Join(r.home, "script.json")
			writeFile(t, script, b)
			cli := shell(block)
			cli.Dir = r.home
			cli.Env = append(cli.Env, "FAKE_CLAUDE_SCRIPT="+script)
			if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "relaying to ") {
				t.Fatalf("ccrelay: %v\n%s", err, out)
			}
			waitJS(t, ctx, "the session on the phone", `!!document.querySelector('li[data-session] a')`)
			id := eval[string](t, ctx, `document.querySelector('li[data-session]').dataset.session`)
			click(t, ctx, `li[data-session="`+id+`"] a`)
			waitJS(t, ctx, "the session's prompt", `document.body.dataset.rendered === "`+id+`" && document.body.innerText.includes(`+jsString(prompt)+`)`)
		default:
			if out, err := shell(block).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", block, err, out)
			}
		}
	}
	return work
}

// docs/deploy.md's LAN recipe: openssl makes the authority and a
// certificate for the LAN address and 127.0.0.1; serve runs at the LAN
// address; pair at https://127.0.0.1 with --ca pairs the phone (Chromium
// trusting the certificate) at the LAN address and remembers the relay and
// the CA; then plain ccrelay, with no flag and no SSL_CERT_FILE, relays a
// session the phone shows.
func TestDeployLANRecipe(t *testing.T) {
	needOpenSSL(t)
	r := newSetupRig(t, "")
	addr, _ := testLANAddress(t)
	port := strconv.Itoa(r.port)
	sub := strings.NewReplacer("192.168.1.9", addr, "8707", port)
	work := followRecipe(t, r, "## On the LAN with your own certificate", sub, "https://"+net.JoinHostPort(addr, port)+"/#pair=", 4,
		func(work string) chromedp.ExecAllocatorOption {
			return chromedp.Flag("ignore-certificate-errors-spki-list", spkiOf(t, filepath.Join(work, "laptop.crt")))
		})
	cfg, err := config.Load(filepath.Join(r.home, ".local", "state", "ccrelay"))
	if err != nil || cfg.Relay != "https://127.0.0.1:"+port || cfg.CAFile != filepath.Join(work, "ca.pem") {
		t.Errorf("remembered %+v, %v", cfg, err)
	}
	checkRecipeAuthority(t, filepath.Join(work, "ca.pem"), addr)
}

// checkRecipeAuthority: the authority the recipe makes, which the phone
// trusts, vouches only for the laptop's address and 127.0.0.1 (critical
// name constraints, no name but localhost) and only for TLS servers: a
// copy of ca.key cannot impersonate any other site to the phone.
func checkRecipeAuthority(t *testing.T, caFile, addr string) {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s holds no PEM certificate", caFile)
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, n := range ca.PermittedIPRanges {
		ips = append(ips, n.String())
	}
	if want := []string{addr + "/32", "127.0.0.1/32"}; !ca.PermittedDNSDomainsCritical || strings.Join(ips, " ") != strings.Join(want, " ") ||
		strings.Join(ca.PermittedDNSDomains, " ") != "localhost" {
		t.Errorf("the recipe's authority may sign for addresses %v and names %v (critical %v): want only %v and localhost, critical",
			ips, ca.PermittedDNSDomains, ca.PermittedDNSDomainsCritical, want)
	}
	if len(ca.ExtKeyUsage) != 1 || ca.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("the recipe's authority is for %v, want TLS servers only", ca.ExtKeyUsage)
	}
}

// docs/deploy.md's Tailscale recipe, with a fake tailscale logged in and a
// stand-in for tailscale serve (HTTPS at the tailnet name, the phone
// trusting its certificate): the phone pairs at the tailnet name, and
// plain ccrelay relays a session it shows.
func TestDeployTailscaleRecipe(t *testing.T) {
	r := newSetupRig(t, tsRunning)
	const name = "laptop.tail1234.ts.net"
	port := strconv.Itoa(r.port)
	proxy, spki := tailnetServe(t, name, loopbackURL("http", r.port))
	sub := strings.NewReplacer("laptop.TAILNET.ts.net", name, "8707", port)
	followRecipe(t, r, "## Tailscale: any network, nothing public", sub, "https://"+name+"/#pair=", 4,
		func(string) chromedp.ExecAllocatorOption {
			return chromedp.Flag("ignore-certificate-errors-spki-list", spki)
		},
		func(string) chromedp.ExecAllocatorOption {
			return chromedp.Flag("host-resolver-rules", "MAP "+name+":443 "+proxy)
		})
	ts, _ := os.ReadFile(r.tsCalls)
	if want := "serve --bg http://127.0.0.1:" + port + "\n"; string(ts) != want {
		t.Errorf("tailscale was asked:\n%s\nwant:\n%s", ts, want)
	}
}

// docs/deploy.md's public server recipe, with Pebble for Let's Encrypt:
// serve at relay.example.com (resolving, in a mount namespace of the
// recipe's own, to a loopback address whose port 443 it listens on) gets
// its certificate from Pebble at the first connection; pair --machine's
// code logs the laptop in; pair pairs the phone (Chromium trusting the
// issued certificate) at the domain; plain ccrelay relays a session the
// phone shows.
func TestDeployACMERecipe(t *testing.T) {
	const domain = "relay.example.com"
	r := newSetupRig(t, "")
	directory, pebbleClient, root := startPebble(t)
	addr := loopbackAddr(t)
	listen := net.JoinHostPort(addr, "443")
	r.listenAt = listen
	// Pebble's roots stand for the system's: the CLI remembers them with
	// the relay, as it does any $SSL_CERT_FILE.
	roots := pemFile(t, pebbleServerCert(t, directory, pebbleClient), root)
	r.env = append(r.env, "SSL_CERT_FILE="+roots)
	r.wrap = func(cmd *exec.Cmd) *exec.Cmd { return withHosts(t, cmd, domain, addr) }
	data := filepath.Join(r.home, "relay-data")
	sub := strings.NewReplacer(" :443", " "+listen, "--acme "+domain, "--acme "+domain+" --acme-directory "+directory, "/var/lib/ccrelay", data)
	followRecipe(t, r, "## A public server with Let's Encrypt", sub, "https://"+domain+"/#pair=", 5,
		func(string) chromedp.ExecAllocatorOption {
			leaf := issuedCert(t, listen, domain, root)
			sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
			return chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(sum[:]))
		},
		func(string) chromedp.ExecAllocatorOption {
			return chromedp.Flag("host-resolver-rules", "MAP "+domain+":443 "+listen)
		})
	if ents, _ := os.ReadDir(filepath.Join(data, "acme")); len(ents) == 0 {
		t.Error("no certificate cached in the relay's data folder")
	}
	cfg, err := config.Load(filepath.Join(r.home, ".local", "state", "ccrelay"))
	if err != nil || cfg.Relay != "https://"+domain || cfg.CAFile != roots {
		t.Errorf("remembered %+v, %v; want %s with %s", cfg, err, "https://"+domain, roots)
	}
}

// issuedCert is the certificate the relay (or its proxy) at addr shows
// for domain, which must chain to root (Pebble's).
func issuedCert(t *testing.T, addr, domain string, root *x509.Certificate) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(root)
	// A proxy may still be getting it: asked again until a deadline.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Minute}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: domain})
		if err == nil {
			defer c.Close()
			return c.ConnectionState().PeerCertificates[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the certificate at %s for %s: %v", addr, domain, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
