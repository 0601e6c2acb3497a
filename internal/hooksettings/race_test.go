package hooksettings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Claude Code writes its settings too (/config, /model, a permission
// always allowed): a change it makes between Install's or Remove's read
// and their write is kept, never overwritten with what was read before it.
func TestChangedWhileWriting(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(path string) (Result, error)
	}{
		{"install", func(path string) (Result, error) { return Install(path, "SessionStart", entry, ours) }},
		{"remove", func(path string) (Result, error) { return Remove(path, "SessionStart", ours) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			if err := os.WriteFile(path, []byte(`{"model": "opus"}`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.name == "remove" {
				if _, err := Install(path, "SessionStart", entry, ours); err != nil {
					t.Fatal(err)
				}
			}
			claudeWrites := 0
			beforeWrite = func() {
				if claudeWrites > 0 {
					return
				}
				claudeWrites++
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				b = []byte(strings.Replace(string(b), `"model": "opus"`, `"model": "opus", "theme": "dark"`, 1))
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { beforeWrite = nil })
			res, err := tc.run(path)
			if err != nil || !res.Changed {
				t.Fatalf("%s: %+v, %v", tc.name, res, err)
			}
			b, _ := os.ReadFile(path)
			s, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"theme": "dark"`) {
				t.Fatalf("the change made meanwhile was lost:\n%s", b)
			}
			want := 1
			if tc.name == "remove" {
				want = 0
			}
			if n := s.Count("SessionStart", ours); n != want {
				t.Fatalf("%d hooks of ours, want %d:\n%s", n, want, b)
			}
		})
	}
}
