package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The user's own --settings, as a file or as JSON, still applies under
// ccrelay: Claude runs with their permission mode, their status line and
// their SessionStart hook, and ccrelay's hook fires too (the session is
// recorded).
func TestUserSettingsStillApply(t *testing.T) {
	for _, form := range []string{"file", "json", "json="} {
		t.Run(form, func(t *testing.T) {
			r := newLocalRun(t, recLines(0, 3), nil)
			marker := filepath.Join(r.state, "user-hook-ran")
			user := `{"permissions":{"defaultMode":"plan"},"statusLine":{"type":"command","command":"echo mine"},` +
				`"hooks":{"SessionStart":[{"matcher":"*","hooks":[{"type":"command","command":"touch ` + marker + `"}]}]}}`
			var args []string
			switch form {
			case "file":
				p := filepath.Join(r.project, "my-settings.json")
				if err := os.WriteFile(p, []byte(user), 0o644); err != nil {
					t.Fatal(err)
				}
				args = []string{"--settings", "my-settings.json"} // relative to the working directory
			case "json":
				args = []string{"--settings", user}
			case "json=":
				args = []string{"--settings=" + user}
			}
			dump := filepath.Join(r.state, "settings.json")
			cmd := r.command(append(args, "--model", "opus")...)
			cmd.Env = append(cmd.Env, "FAKE_CLAUDE_SETTINGSDUMP="+dump)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ccrelay: %v\n%s", err, out)
			}
			b, err := os.ReadFile(dump)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Permissions struct {
					DefaultMode string `json:"defaultMode"`
				} `json:"permissions"`
				StatusLine struct {
					Command string `json:"command"`
				} `json:"statusLine"`
				Hooks map[string][]struct {
					Hooks []struct{ Command string } `json:"hooks"`
				} `json:"hooks"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if got.Permissions.DefaultMode != "plan" || !strings.Contains(got.StatusLine.Command, "echo mine") || len(got.Hooks["SessionStart"]) != 2 {
				t.Fatalf("Claude's settings: %s", b)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("the user's hook did not run: %v", err)
			}
			if envs := r.envelopes(t); len(envs) < 3 {
				t.Fatalf("ccrelay's hook did not fire: %d envelopes", len(envs))
			}
		})
	}
}
