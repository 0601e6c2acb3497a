package main

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ccrelay/ccrelay/internal/config"
)

// needCaddy is Caddy's binary, from CCRELAY_TEST_CADDY (.ci/run installs
// Debian's, pinned); CI must have it.
func needCaddy(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CCRELAY_TEST_CADDY")
	err := errors.New("CCRELAY_TEST_CADDY is not set")
	if p != "" {
		_, err = os.Stat(p)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Caddy (%v): CI must have it for the Caddy recipe", err)
		}
		t.Skipf("no Caddy: %v", err)
	}
	return p
}

// docs/deploy.md's Caddy recipe, then the public server recipe's steps 4
// to 6: Caddy (its certificate from Pebble) in front of the relay at
// relay.example.com, the laptop logged in with pair --machine's code, the
// phone (Chromium trusting the issued certificate) paired at the domain,
// and a session plain ccrelay relays shown on it.
func TestDeployCaddyRecipe(t *testing.T) {
	const domain = "relay.example.com"
	caddy := needCaddy(t)
	r := newSetupRig(t, "")
	if err := os.Symlink(caddy, filepath.Join(r.bin, "caddy")); err != nil {
		t.Fatal(err)
	}
	directory, pebbleClient, root := startPebble(t)
	addr := loopbackAddr(t)
	r.proxyAt, r.proxyName = net.JoinHostPort(addr, "443"), domain
	roots := pemFile(t, pebbleServerCert(t, directory, pebbleClient), root)
	r.env = append(r.env, "SSL_CERT_FILE="+roots)
	r.wrap = func(cmd *exec.Cmd) *exec.Cmd { return withHosts(t, cmd, domain, addr) }

	caddyfiles := docBlocks(t, "## Behind Caddy", "caddyfile")
	if len(caddyfiles) != 1 {
		t.Fatalf("the Caddy recipe has %d caddyfile blocks, want 1", len(caddyfiles))
	}
	port := strconv.Itoa(r.port)
	data := filepath.Join(r.home, "relay-data")
	sub := strings.NewReplacer("8707", port, "/var/lib/ccrelay", data)
	global := "{\n\tadmin off\n\tacme_ca " + directory + "\n\tacme_ca_root " + roots + "\n\tdefault_bind " + addr + "\n}\n"
	work := filepath.Join(r.home, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "Caddyfile"), []byte(global+sub.Replace(caddyfiles[0])))

	blocks := recipeBlocks(t, "## Behind Caddy")
	if len(blocks) != 3 {
		t.Fatalf("the Caddy recipe has %d sh blocks, want 3 (serve, caddy run, pair --machine): %q", len(blocks), blocks)
	}
	public := recipeBlocks(t, "## A public server with Let's Encrypt")
	if len(public) != 5 {
		t.Fatalf("the public server recipe has %d sh blocks, want 5", len(public))
	}
	followBlocks(t, r, "Behind Caddy", append(blocks, public[2:]...), sub, "https://"+domain+"/#pair=",
		func(string) chromedp.ExecAllocatorOption {
			leaf := issuedCert(t, r.proxyAt, domain, root)
			sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
			return chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(sum[:]))
		},
		func(string) chromedp.ExecAllocatorOption {
			return chromedp.Flag("host-resolver-rules", "MAP "+domain+":443 "+r.proxyAt)
		})
	cfg, err := config.Load(filepath.Join(r.home, ".local", "state", "ccrelay"))
	if err != nil || cfg.Relay != "https://"+domain || cfg.CAFile != roots {
		t.Errorf("remembered %+v, %v; want %s with %s", cfg, err, "https://"+domain, roots)
	}
}
