package launcher

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
)

func TestHookEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		goos string
		argv []string
		want string // the entry as JSON
	}{
		{"unix plain", "linux", []string{"/usr/local/bin/ccrelay", "hook", "/home/me/.local/state/ccrelay/h/hook.json"},
			`{"command":"/usr/local/bin/ccrelay hook /home/me/.local/state/ccrelay/h/hook.json","type":"command"}`},
		{"unix spaces and quotes", "darwin", []string{"/Users/me/My Tools/ccrelay", "hook", "/Users/it's/$x/hook.json"},
			`{"command":"'/Users/me/My Tools/ccrelay' hook '/Users/it'\\''s/$x/hook.json'","type":"command"}`},
		{"windows", "windows", []string{`C:\Users\me\AppData\Local\Programs\ccrelay\ccrelay.exe`, "hook", `C:\Users\me\AppData\Local\ccrelay\state\projects\C--app\ccrelay-hook-1\hook.json`},
			`{"args":["hook","C:\\Users\\me\\AppData\\Local\\ccrelay\\state\\projects\\C--app\\ccrelay-hook-1\\hook.json"],"command":"C:\\Users\\me\\AppData\\Local\\Programs\\ccrelay\\ccrelay.exe","type":"command"}`},
		{"windows spaces, quotes, $ and UNC", "windows", []string{`C:\Program Files\ccrelay\ccrelay.exe`, "hook", `\\server\it's $HOME\hook.json`},
			`{"args":["hook","\\\\server\\it's $HOME\\hook.json"],"command":"C:\\Program Files\\ccrelay\\ccrelay.exe","type":"command"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(hookEntry(tc.goos, tc.argv))
			if string(b) != tc.want {
				t.Fatalf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}

// The hook forms reach ccrelay with the real Claude Code: the shell form
// (Unix) and the exec form Windows uses, both with a hook command whose path
// has a space, a quote and a $ (as "C:\Users\O'Brien\My Tools" may).
func TestRealClaudeRunsHookForms(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		t.Run(goos, func(t *testing.T) {
			e := claudetest.New(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("hi")}})
			old := hookOS
			hookOS = goos
			defer func() { hookOS = old }()
			dir := filepath.Join(t.TempDir(), "O'Brien $HOME", "My Tools")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fwd := filepath.Join(dir, "fake claude")
			b, err := os.ReadFile(fakeClaude)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(fwd, b, 0o755); err != nil {
				t.Fatal(err)
			}
			got := make(chan SessionStart, 4)
			h, err := startHookServer(func(s SessionStart) { got <- s }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer h.close()
			settings, cleanup, err := writeSettings(t.TempDir(), []string{fwd, "hook"}, h)
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			const session = "6d0c2f0e-5b1a-4c39-9a57-3f1e2d4c5b6a"
			e.Run(t, nil, "-p", "say hi", "--session-id", session, "--settings="+settings)
			select {
			case s := <-got:
				if s.SessionID != session || s.Source != "startup" {
					t.Fatalf("hook reported %+v", s)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the SessionStart hook never reached ccrelay")
			}
		})
	}
}
