package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
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

// startServe runs `ccrelay serve` on a free port (with extra flags) and
// returns its URL and token.
func startServe(t *testing.T, data string, extra ...string) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, extra...)...)
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

// Listening on every address over plain http, serve prints the app URL on
// 127.0.0.1 for this machine, no phone URL (plain http answers only this
// machine), and a note that says so.
func TestServeEverywhere(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--data", t.TempDir(), "--listen", "0.0.0.0:0")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	var app, note string
	var phones []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if u, ok := strings.CutPrefix(line, "app:"); ok {
			app = strings.TrimSpace(u)
		} else if u, ok := strings.CutPrefix(line, "phone:"); ok {
			phones = append(phones, strings.TrimSpace(u))
		} else if u, ok := strings.CutPrefix(line, "note:"); ok {
			note = u
		} else if strings.Contains(line, "Ctrl-C stops") {
			break
		}
	}
	go io.Copy(io.Discard, out)
	if !strings.HasPrefix(app, "http://127.0.0.1:") {
		t.Fatalf("app URL %q", app)
	}
	if len(phones) != 0 || !strings.Contains(note, "HTTPS") {
		t.Errorf("phone URLs %q, note %q", phones, note)
	}
}

// serve on a port that is taken fails before it creates anything, and says
// which flag changes the port; portTaken recognises the error.
func TestServePortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	res := run(t, "serve", "--data", data, "--listen", ln.Addr().String())
	if res.code == 0 || !strings.Contains(res.stderr, "--listen") || !strings.Contains(res.stderr, "port is taken") {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data folder was created before listening: %v", err)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		listen string
		taken  bool
	}{
		{ln.Addr().String(), true},
		{"127.0.0.1:99999", false}, // not an address
	} {
		_, err := startRelay(tc.listen, data, quiet)
		if err == nil || portTaken(err) != tc.taken || !strings.Contains(err.Error(), "--listen") {
			t.Errorf("%s: portTaken %v for %v", tc.listen, portTaken(err), err)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("%s: the data folder was created before listening: %v", tc.listen, err)
		}
	}
}

// A data folder open to others is made private, with a warning.
func TestServeDataFolderMadePrivate(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(data, 0o755)
	var logs bytes.Buffer
	rl, err := startRelay("127.0.0.1:0", data, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rl.wait(ctx)
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data folder: %v %v", fi.Mode(), err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "now 0700") {
		t.Fatalf("no warning:\n%s", logs.String())
	}
}

// --max-conns-per-addr reaches the relay: the connection over it is
// answered 429.
func TestServeConnectionCapFlag(t *testing.T) {
	cmd, base, token := startServe(t, t.TempDir(), "--max-conns-per-addr", "1")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", token)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first connection: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, base+"/health", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second connection: status %d", resp.StatusCode)
	}
}
