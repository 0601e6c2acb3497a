package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/relay"
)

// Under --log-format json (a journal, a log collector) serve prints no link
// with the relay's token, on stdout or in its log: one JSON line says the
// relay is up and how to get the link (ccrelay pair). Every line it writes
// is JSON, and no line holds the token, also after requests with the token
// and with a wrong one.
func TestServeJSONLogHoldsNoToken(t *testing.T) {
	data := t.TempDir()
	cmd := exec.Command(binary, "serve", "--data", data, "--listen", "127.0.0.1:0", "--log-format", "json")
	var stdout bytes.Buffer // read once the process has ended
	cmd.Stdout = &stdout
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var stderr bytes.Buffer
	up := make(chan map[string]any, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "relay listening" {
				up <- m
			}
		}
	}()
	var line map[string]any
	select {
	case line = <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("no relay listening line in the log")
	}
	app, _ := line["app"].(string)
	link, _ := line["link"].(string)
	if !strings.HasPrefix(app, "http://127.0.0.1:") || !strings.Contains(link, "ccrelay pair") || !strings.Contains(link, filepath.Join(data, relay.TokenFile)) {
		t.Errorf("the listening line %v: want the app's address and how to get the link", line)
	}
	b, err := os.ReadFile(filepath.Join(data, relay.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	base := strings.TrimSuffix(app, "/")
	for _, cred := range []string{token, token[:40] + "wrong", "ccr_" + token} {
		req, _ := http.NewRequest("GET", base+"/status", nil)
		req.Header.Set("Authorization", "Bearer "+cred)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	cmd.Wait()
	for name, text := range map[string]string{"stdout": stdout.String(), "log": stderr.String()} {
		if strings.Contains(text, token[:32]) || regexp.MustCompile(`#token=[0-9a-f]`).MatchString(text) {
			t.Errorf("the token is in the %s:\n%s", name, text)
		}
		for l := range strings.Lines(text) {
			if !json.Valid([]byte(l)) {
				t.Errorf("a line of the %s is not JSON: %q", name, l)
			}
		}
	}
	if !strings.Contains(stderr.String(), "relay stopped") {
		t.Errorf("log: %s", stderr.String())
	}
}
