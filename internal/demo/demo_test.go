package demo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteLaysOutTheSession(t *testing.T) {
	dir := t.TempDir()
	main, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{main, filepath.Join(dir, SessionID, "subagents", "agent-a88185909f7879d42.jsonl")} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
