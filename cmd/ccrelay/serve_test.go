package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ccrelay serve: token created once with mode 0600, the app URL printed with
// the token in the fragment, health needs the token, SIGTERM stops it.
func TestServe(t *testing.T) {
	data := t.TempDir()
	start := func() (*exec.Cmd, string, string) { return startServe(t, data) }
	cmd, base, token := start()
	fi, err := os.Stat(filepath.Join(data, "token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	get := func(tok string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/health", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get(token) != 200 || get("") != 401 || get(strings.Repeat("0", len(token))) != 401 {
		t.Fatal("health auth")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve did not stop cleanly: %v", err)
	}
	// The same token on the next start.
	cmd2, _, token2 := start()
	defer func() { cmd2.Process.Signal(syscall.SIGTERM); cmd2.Wait() }()
	if token2 != token {
		t.Fatal("token changed across restarts")
	}
}

// startServe runs `ccrelay serve` on a free port and returns its URL and token.
func startServe(t *testing.T, data string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--data", data, "--listen", "127.0.0.1:0")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var base, token string
	re := regexp.MustCompile(`app:\s+(http://[0-9.:]+)/#token=([0-9a-f]+)`)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() && time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			base, token = m[1], m[2]
			break
		}
	}
	go io.Copy(io.Discard, out)
	if base == "" {
		cmd.Process.Kill()
		t.Fatal("serve printed no app URL")
	}
	return cmd, base, token
}

// Listening on every address (for a phone), serve prints the app URL on
// 127.0.0.1 for this machine and one per network address for others.
func TestServeEverywhere(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--data", t.TempDir(), "--listen", "0.0.0.0:0")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	var app string
	var phones []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if u, ok := strings.CutPrefix(line, "app:"); ok {
			app = strings.TrimSpace(u)
		} else if u, ok := strings.CutPrefix(line, "phone:"); ok {
			phones = append(phones, strings.TrimSpace(u))
		} else if strings.Contains(line, "Ctrl-C stops") {
			break
		}
	}
	go io.Copy(io.Discard, out)
	if !strings.HasPrefix(app, "http://127.0.0.1:") {
		t.Fatalf("app URL %q", app)
	}
	token := app[strings.Index(app, "#token="):]
	for _, p := range phones {
		host := strings.TrimPrefix(p[:strings.Index(p, "/#")], "http://")
		h, _, _ := net.SplitHostPort(host)
		if ip := net.ParseIP(h); ip == nil || ip.IsLoopback() || ip.To4() == nil || !strings.HasSuffix(p, token) {
			t.Errorf("phone URL %q", p)
		}
	}
	t.Logf("app %s, %d network URLs", app, len(phones))
}
