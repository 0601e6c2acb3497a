package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/relay"
)

// ccrelay's status line: the user's own first (run as Claude runs it, with
// Claude's input), then the relay's state from the status file.
func TestStatusLineCommand(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no status line on Windows")
	}
	dir := t.TempDir()
	n := 0
	user := func(cmd string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("user-%d.json", n))
		if err := os.WriteFile(p, []byte(`{"type":"command","command":`+quoteJSON(cmd)+`}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	status := func(st *launcher.RelayStatus) string {
		p := filepath.Join(dir, "status.json")
		os.Remove(p)
		if st != nil {
			if err := launcher.WriteStatus(p, *st); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	tests := []struct {
		name, user string
		status     *launcher.RelayStatus
		want       string
	}{
		{"relayed, no own line", "", &launcher.RelayStatus{Connected: true}, "ccrelay: relayed"},
		{"the user's line first", user("echo mine"), &launcher.RelayStatus{Connected: true}, "mine  ccrelay: relayed"},
		{"Claude's input reaches it", user(`sed 's/.*"session_id":"\([^"]*\)".*/session \1/'`), &launcher.RelayStatus{Connected: true, Unsent: 2048}, "session s1  ccrelay: sending 2.0 KB"},
		{"two lines", user("printf 'one\\ntwo\\n'"), &launcher.RelayStatus{}, "one  ccrelay: relay unreachable, 0 B kept\ntwo"},
		{"refused", user("echo mine"), &launcher.RelayStatus{Refused: true}, "mine  ccrelay: the relay refused the token (kept on disk)"},
		{"a failing own line", user("exit 3"), &launcher.RelayStatus{Connected: true}, "ccrelay: relayed"},
		{"no status yet", user("echo mine"), nil, "mine  ccrelay: starting"},
		{"no own line file", filepath.Join(dir, "missing.json"), &launcher.RelayStatus{Connected: true}, "ccrelay: relayed"},
		{"transcripts polled", user("echo mine"), &launcher.RelayStatus{Connected: true, Polled: true},
			"mine  ccrelay: relayed, transcripts polled (inotify limit reached; see ccrelay.log)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newStatusLineCmd()
			var out bytes.Buffer
			cmd.SetIn(strings.NewReader(`{"session_id":"s1"}`))
			cmd.SetOut(&out)
			cmd.SetArgs([]string{"--status", status(tc.status), "--user", tc.user})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(out.String(), "\n"); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// Under ccrelay with a relay, Claude's status line is ccrelay's, which
// shows the user's own (from their --settings, or Claude's settings files)
// and then the relay's state: relayed once connected, the refusal when the
// relay refuses the token.
func TestStatusLineUnderRelay(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no status line on Windows")
	}
	srv, base, token := startServe(t, t.TempDir())
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	tests := []struct {
		name, where, token, until, want string
	}{
		{"flag", "flag", token, "relayed", "mine  ccrelay: relayed"},
		{"project settings", "project", token, "relayed", "mine  ccrelay: relayed"},
		{"user settings", "home", token, "relayed", "mine  ccrelay: relayed"},
		{"refused", "flag", "not-the-token-0123456789", "refused", "mine  ccrelay: the relay refused the token (kept on disk)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newLocalRun(t, recLines(0, 3), nil)
			own := `{"statusLine":{"type":"command","command":"echo mine","padding":1}}`
			args := []string{"--claude", fakeClaude, "--state", r.state, "--relay", base, "--relay-token", tc.token}
			switch tc.where {
			case "flag":
				args = append(args, "--settings", own)
			case "project":
				os.MkdirAll(filepath.Join(r.project, ".claude"), 0o755)
				os.WriteFile(filepath.Join(r.project, ".claude", "settings.json"), []byte(own), 0o644)
			case "home":
				os.MkdirAll(filepath.Join(r.home, ".claude"), 0o755)
				os.WriteFile(filepath.Join(r.home, ".claude", "settings.json"), []byte(own), 0o644)
			}
			shown := filepath.Join(r.state, "statusline.txt")
			dump := filepath.Join(r.state, "settings.json")
			cmd := exec.Command(binary, args...)
			cmd.Dir = r.project
			cmd.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + r.script,
				"FAKE_CLAUDE_STATUSLINE=" + shown, "FAKE_CLAUDE_STATUSLINE_UNTIL=" + tc.until, "FAKE_CLAUDE_SETTINGSDUMP=" + dump}
			out, err := cmd.CombinedOutput()
			if err != nil && tc.name != "refused" {
				t.Fatalf("ccrelay: %v\n%s", err, out)
			}
			b, _ := os.ReadFile(shown)
			if got := strings.TrimSuffix(string(b), "\n"); got != tc.want {
				settings, _ := os.ReadFile(dump)
				t.Fatalf("status line %q, want %q\nsettings: %s\n%s", got, tc.want, settings, out)
			}
			if settings, _ := os.ReadFile(dump); !strings.Contains(string(settings), `"padding":1`) {
				t.Errorf("the user's padding is not kept: %s", settings)
			}
		})
	}
}

// ccrelay --resume X --fork-session: the fork Claude runs is announced with
// forkedFrom X (the app links it to X); the parent's info says nothing of it.
func TestForkAnnouncedWithParent(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	const parent = "12121212-2222-4333-8444-555555555555"
	r := newLocalRun(t, recLines(0, 3), nil)
	cmd := exec.Command(binary, "--claude", fakeClaude, "--state", r.state, "--relay", base, "--relay-token", token, "--resume", parent, "--fork-session")
	cmd.Dir = r.project
	cmd.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + r.script}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ccrelay: %v\n%s", err, out)
	}
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sessions, err := st.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	forks := 0
	for _, s := range sessions {
		var info struct {
			ForkedFrom string `json:"forkedFrom"`
		}
		json.Unmarshal(s.Info, &info)
		switch {
		case s.ID == parent && info.ForkedFrom != "":
			t.Errorf("the parent says it is forked from %s", info.ForkedFrom)
		case s.ID != parent && info.ForkedFrom == parent:
			forks++
		}
	}
	if forks != 1 {
		t.Fatalf("%d sessions forked from %s; sessions: %+v", forks, parent, sessions)
	}
}
