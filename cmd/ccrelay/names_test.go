package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hasControls says whether s holds a bidirectional control or an escape.
func hasControls(s string) bool {
	return strings.ContainsAny(s, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\x1b")
}

// The CLI shows and keeps machine and device names without bidirectional or
// other control characters, whatever the relay sends (ccrelay devices,
// ccrelay login), and sends none in the name it gives (login --name).
func TestCLINamesDropControls(t *testing.T) {
	sent := make(chan string, 1)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/devices":
			json.NewEncoder(w).Encode([]map[string]any{
				{"name": "Ann\u202e's phone", "role": "device", "lastSeen": 0, "address": "10.0.0.2\x1b[2J"},
				{"name": "\u2066lap\u2069top\u200f", "role": "machine\u061c", "lastSeen": 0, "address": ""},
			})
		case "/api/pair/redeem":
			var req struct{ Name string }
			json.NewDecoder(r.Body).Decode(&req)
			sent <- req.Name
			json.NewEncoder(w).Encode(map[string]any{"credential": "ccr_x", "name": "desk\u202etop\x1b]0;x\x07", "role": "machine"})
		default:
			http.NotFound(w, r)
		}
	}))
	defer fake.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("0f1e2d3c4b5a69788796a5b4c3d2e1f0\n"), 0o600)

	res := run(t, "devices", "--relay", fake.URL, "--relay-token-file", tokenFile, "--state", t.TempDir())
	if res.code != 0 || hasControls(res.stdout) || !strings.Contains(res.stdout, "Ann's phone") || !strings.Contains(res.stdout, "laptop") {
		t.Errorf("devices: %+v", res)
	}

	state := t.TempDir()
	res = run(t, "login", fake.URL, "ABCDEFGHJK", "--state", state, "--name", "my\u202e laptop\u2067")
	if name := <-sent; name != "my laptop" {
		t.Errorf("login sent the name %q", name)
	}
	if res.code != 0 || hasControls(res.stdout) || !strings.Contains(res.stdout, `"desktop ]0;x"`) {
		t.Errorf("login: %+v", res)
	}
	b, _ := os.ReadFile(filepath.Join(state, LoginFile))
	var l login
	if err := json.Unmarshal(b, &l); err != nil || l.Name != "desktop ]0;x" {
		t.Errorf("login file %s: %v", b, err)
	}
}
