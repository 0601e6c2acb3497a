package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The user's status line is taken where Claude Code would take it from:
// their --settings, then the project's local settings, the project's, the
// user's ($CLAUDE_CONFIG_DIR or ~/.claude).
func TestUserStatusLinePrecedence(t *testing.T) {
	line := func(cmd string) string { return `{"statusLine":{"type":"command","command":"` + cmd + `"}}` }
	tests := []struct {
		name  string
		flag  map[string]any
		files map[string]string // relative to a root holding project/ and home/
		env   []string          // {{root}} is replaced
		want  string            // the command, "" for none
	}{
		{"none", nil, nil, []string{"HOME={{root}}/home"}, ""},
		{"flag first", map[string]any{"statusLine": map[string]any{"command": "flag"}},
			map[string]string{"project/.claude/settings.local.json": line("local")}, []string{"HOME={{root}}/home"}, "flag"},
		{"local before project", nil, map[string]string{"project/.claude/settings.local.json": line("local"), "project/.claude/settings.json": line("project")},
			[]string{"HOME={{root}}/home"}, "local"},
		{"project before user", nil, map[string]string{"project/.claude/settings.json": line("project"), "home/.claude/settings.json": line("user")},
			[]string{"HOME={{root}}/home"}, "project"},
		{"user", nil, map[string]string{"home/.claude/settings.json": line("user")}, []string{"HOME={{root}}/home"}, "user"},
		{"config dir", nil, map[string]string{"home/.claude/settings.json": line("user"), "conf/settings.json": line("conf")},
			[]string{"HOME={{root}}/home", "CLAUDE_CONFIG_DIR={{root}}/conf"}, "conf"},
		{"unreadable JSON skipped", nil, map[string]string{"project/.claude/settings.json": "{", "home/.claude/settings.json": line("user")},
			[]string{"HOME={{root}}/home"}, "user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				p = filepath.Join(root, p)
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte(c), 0o644)
			}
			os.MkdirAll(filepath.Join(root, "project"), 0o755)
			var env []string
			for _, e := range tc.env {
				env = append(env, strings.ReplaceAll(e, "{{root}}", root))
			}
			got := userStatusLine(tc.flag, filepath.Join(root, "project"), env)
			cmd := ""
			if m, ok := got.(map[string]any); ok {
				cmd, _ = m["command"].(string)
			}
			if cmd != tc.want {
				t.Fatalf("got %v, want command %q", got, tc.want)
			}
		})
	}
}
