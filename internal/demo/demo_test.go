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
	if filepath.Base(main) != SessionID()+".jsonl" {
		t.Fatalf("main transcript %s, session %q", main, SessionID())
	}
	subs, _ := filepath.Glob(filepath.Join(dir, SessionID(), "subagents", "agent-*.jsonl"))
	if len(subs) != 1 {
		t.Fatalf("subagent transcripts: %v", subs)
	}
	for _, p := range append(subs, main) {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
