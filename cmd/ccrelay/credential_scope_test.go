package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This machine's login credential goes to the relay it was made for, and
// to no other: a relay named with --to, --relay or $CCRELAY_RELAY that is
// not the login's hears no credential of it (the command says the login
// is for another relay). Without the fix the other relay got the
// credential (Authorization: Bearer …), with which it could act as this
// machine on the login's relay.
func TestLoginCredentialOnlyForItsRelay(t *testing.T) {
	const cred = "machine-credential-of-relay-a-0123456789abcdef"
	state, home := t.TempDir(), t.TempDir()
	b, _ := json.Marshal(login{Relay: "http://127.0.0.1:1", Credential: cred, Name: "desk"})
	if err := os.WriteFile(filepath.Join(state, LoginFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 16)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case heard <- r.Header.Get("Authorization"):
		default:
		}
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer other.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "replay", "--format", "jsonl", "--to", other.URL, "--state", state, pacedSession(t, 1))
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	done := make(chan struct{})
	var out []byte
	go func() { defer close(done); out, _ = cmd.CombinedOutput() }()
	select {
	case auth := <-heard:
		if strings.Contains(auth, cred) {
			t.Fatalf("the other relay was sent this machine's login credential: %q", auth)
		}
	case <-done:
		if !strings.Contains(string(out), "login") || !strings.Contains(string(out), "http://127.0.0.1:1") {
			t.Fatalf("replay --to another relay did not say the login is for another relay:\n%s", out)
		}
	case <-ctx.Done():
		t.Fatal("replay --to neither reached the other relay nor ended")
	}
	cancel()
	<-done
}

// The token file of a relay on this machine goes to that relay (reached
// at a loopback address, or the relay this machine remembers), not to
// whatever relay a command names: that token is the relay's whole
// account. Without the fix a relay named with --to got it (here through
// a proxy, as to a relay on another machine).
func TestLocalRelayTokenOnlyForLocalRelay(t *testing.T) {
	const tok = "local-relay-token-0123456789abcdef0123456789abcdef"
	home, state := t.TempDir(), t.TempDir()
	data := filepath.Join(home, ".local", "share", "ccrelay")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 16)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case heard <- r.Header.Get("Authorization"):
		default:
		}
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "replay", "--format", "jsonl", "--to", "http://relay.elsewhere.invalid:8707", "--plaintext", "--state", state, pacedSession(t, 1))
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "HTTP_PROXY=" + proxy.URL, "http_proxy=" + proxy.URL}
	done := make(chan struct{})
	var out []byte
	go func() { defer close(done); out, _ = cmd.CombinedOutput() }()
	select {
	case auth := <-heard:
		if strings.Contains(auth, tok) {
			t.Fatalf("a relay on another machine was sent the local relay's token: %q", auth)
		}
	case <-done:
		if !strings.Contains(string(out), "no relay token") {
			t.Fatalf("replay --to another machine's relay:\n%s", out)
		}
	case <-ctx.Done():
		t.Fatal("replay --to neither reached the other relay nor ended")
	}
	cancel()
	<-done
}
