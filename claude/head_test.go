package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadHead(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, cwd, prompt string
	}{
		{"typed prompt", `{"type":"summary","summary":"x"}
{"type":"user","cwd":"/home/me/app","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>x</local-command-caveat>"}}
{"type":"user","cwd":"/home/me/app","message":{"role":"user","content":"<command-name>/clear</command-name>"}}
{"type":"user","cwd":"/home/me/app","message":{"role":"user","content":[{"type":"text","text":"  fix the build  "}]}}
`, "/home/me/app", "fix the build"},
		{"no prompt yet", `{"type":"system","cwd":"/srv/x"}` + "\n", "/srv/x", ""},
		{"a long line is skipped", `{"type":"user","cwd":"/a","message":{"role":"user","content":"` + strings.Repeat("x", HeadLineBytes) + `"}}
{"type":"user","cwd":"/a","message":{"role":"user","content":"second"}}
`, "/a", "second"},
		{"a torn last line is not read", `{"type":"user","cwd":"/b","message":{"role":"user","content":"hal`, "", ""},
		{"tool results are no prompt", `{"type":"user","cwd":"/c","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}
`, "/c", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
			os.WriteFile(p, []byte(tc.body), 0o600)
			h, err := ReadHead(p)
			if err != nil {
				t.Fatal(err)
			}
			if h.Cwd != tc.cwd || h.Prompt != tc.prompt {
				t.Fatalf("head = %+v, want cwd %q prompt %q", h, tc.cwd, tc.prompt)
			}
		})
	}
	if _, err := ReadHead(filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Fatal("a missing transcript read")
	}
}

func TestMarkup(t *testing.T) {
	for _, c := range []struct{ text, tag, want string }{
		{"<command-name>/cost</command-name>\n<command-args></command-args>", "command-name", "/cost"},
		{"<command-name>/model</command-name><command-args> opus </command-args>", "command-args", "opus"},
		{"<status>completed</status><status>failed</status>", "status", "completed"},
		{"<summary>no end", "summary", ""},
		{"plain text", "command-name", ""},
	} {
		if got := Markup(c.text, c.tag); got != c.want {
			t.Errorf("Markup(%q, %q) = %q, want %q", c.text, c.tag, got, c.want)
		}
	}
}
