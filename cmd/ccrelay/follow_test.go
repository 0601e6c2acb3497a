package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/internal/hooksettings"
)

// ccrelay follow install and uninstall on the user's settings: merged and
// given back byte for byte, or refused untouched with a message that says
// what is wrong and what to do.
func TestFollowInstallCommand(t *testing.T) {
	cases := []struct {
		name, settings string
		refused        string // what the refusal says ("": installed)
	}{
		{"no settings yet", "", ""},
		{"settings with unknown keys", "{\n  \"model\": \"opus\",\n  \"someFutureKey\": {\"x\": [1, 2.50, \"<&>\"]}\n}\n", ""},
		{"invalid JSON", "{\"model\": \"opus\",,}\n", "is not valid JSON"},
		{"hooks of another shape", "{\"hooks\": [\"x\"]}\n", "hooks is not an object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home, state := t.TempDir(), t.TempDir()
			settings := filepath.Join(home, ".claude", "settings.json")
			if tc.settings != "" {
				os.MkdirAll(filepath.Dir(settings), 0o700)
				if err := os.WriteFile(settings, []byte(tc.settings), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			follow := func(args ...string) (string, error) {
				cmd := exec.Command(binary, append([]string{"follow"}, args...)...)
				cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			out, err := follow("install", "--state", state)
			if tc.refused != "" {
				if err == nil || !strings.Contains(out, tc.refused) || !strings.Contains(out, settings) || !strings.Contains(out, "nothing was changed") {
					t.Fatalf("install: %v\n%s\nwant a refusal naming %s and saying %q", err, out, settings, tc.refused)
				}
				if b, _ := os.ReadFile(settings); string(b) != tc.settings {
					t.Fatalf("a refused file was changed: %q", b)
				}
				return
			}
			if err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			if !strings.Contains(out, "No relay is set up yet") {
				t.Errorf("install without a relay does not say so:\n%s", out)
			}
			b, err := os.ReadFile(settings)
			if err != nil {
				t.Fatal(err)
			}
			s, err := hooksettings.Parse(b)
			if err != nil || s.Count("SessionStart", isFollowHook) != 1 || !strings.Contains(string(b), binaryPath(t)) || !strings.Contains(string(b), state) {
				t.Fatalf("installed settings (%v):\n%s", err, b)
			}
			if strings.Contains(tc.settings, "someFutureKey") && !strings.Contains(string(b), `"someFutureKey": {`) {
				t.Fatalf("an unknown key was lost:\n%s", b)
			}
			if out, _ := follow(); !strings.Contains(out, "are followed") {
				t.Errorf("ccrelay follow after install: %s", out)
			}
			status := func() string {
				cmd := exec.Command(binary, "status", "--state", state)
				cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
				out, _ := cmd.CombinedOutput()
				return string(out)
			}
			// One line, said once: "plain claude: followed (…)".
			if out := status(); !strings.Contains(out, "plain claude: followed (the hook is in "+settings) || strings.Count(out, "plain claude") != 1 {
				t.Errorf("ccrelay status after install:\n%s", out)
			}
			// Said as it is: a file install made is removed, not "as it was".
			want := "is as it was before ccrelay follow install"
			if tc.settings == "" {
				want = "there was no " + settings + " before ccrelay follow install, and there is none again"
			}
			if out, err := follow("uninstall"); err != nil || !strings.Contains(out, want) {
				t.Fatalf("uninstall (%v), want %q:\n%s", err, want, out)
			}
			got, err := os.ReadFile(settings)
			if tc.settings == "" {
				if !os.IsNotExist(err) {
					t.Fatalf("a settings file install made is left: %q (%v)", got, err)
				}
			} else if string(got) != tc.settings {
				t.Fatalf("after uninstall:\n%q\nwant, byte for byte:\n%q", got, tc.settings)
			}
			if out, _ := follow(); !strings.Contains(out, "not followed") {
				t.Errorf("ccrelay follow after uninstall: %s", out)
			}
			if out := status(); !strings.Contains(out, "plain claude: not followed (ccrelay follow install adds the hook to "+settings) || strings.Count(out, "plain claude") != 1 {
				t.Errorf("ccrelay status after uninstall:\n%s", out)
			}
		})
	}
}

// install says when the follower could not relay to the remembered relay:
// here, no credential for a relay on another machine.
func TestFollowInstallSaysWhatBlocksIt(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	if err := config.Remember(state, "https://relay.example:8707", ""); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "follow", "install", "--state", state)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "cannot be relayed to https://relay.example:8707 yet: no relay token") ||
		!strings.Contains(string(out), "ccrelay login") {
		t.Fatalf("install: %v\n%s", err, out)
	}
}

// binaryPath is the test binary's path as the hook names it (symbolic
// links resolved).
func binaryPath(t *testing.T) string {
	p, err := filepath.EvalSymlinks(binary)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestIsFollowHook(t *testing.T) {
	for _, tc := range []struct {
		hook map[string]any
		want bool
	}{
		{map[string]any{"type": "command", "command": "'/usr/local/bin/ccrelay' follow hook"}, true},
		{map[string]any{"type": "command", "command": "/home/me/go/bin/ccrelay follow hook --state /tmp/s"}, true},
		{map[string]any{"type": "command", "command": `C:\Tools\ccrelay.exe`, "args": []any{"follow", "hook"}}, true},
		{map[string]any{"type": "command", "command": "ccrelay hook /tmp/x/hook.json"}, false},
		{map[string]any{"type": "command", "command": "echo follow hook"}, false},
		{map[string]any{"type": "command", "command": "my-ccrelay-notes.sh"}, false},
	} {
		if got := isFollowHook(tc.hook); got != tc.want {
			t.Errorf("isFollowHook(%v) = %v, want %v", tc.hook, got, tc.want)
		}
	}
}

// ccrelay --help says where a session goes without a relay and without
// --out: one file per session in the folder's state, as the start line
// says, not the single outbox.jsonl of earlier versions.
func TestOutFlagHelpNamesTheDefault(t *testing.T) {
	r := run(t, "--help")
	var line string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "--out ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no --out in the help:\n%s", r.stdout)
	}
	if strings.Contains(line, "outbox.jsonl") || !strings.Contains(line, "<state>/projects/<folder>/sessions") {
		t.Errorf("--out's help does not name the real default (one file per session in <state>/projects/<folder>/sessions):\n%s", line)
	}
}

// On a machine with no relay, every command that needs one names ccrelay
// setup, the README's first step: ccrelay pair alone cannot work there, as
// no relay runs yet to pair with.
func TestNoRelayHintsNameSetup(t *testing.T) {
	for _, args := range [][]string{
		{"status"},
		{"follow", "install"},
		{"daemon"},
		{"daemon", "install"},
		{"pair", "--no-wait"},
		{"sessions", "ls"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			home := t.TempDir()
			cmd := exec.Command(binary, args...)
			cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), "run ccrelay setup") {
				t.Errorf("ccrelay %s with no relay set up does not name ccrelay setup:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}
