package daemon

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
)

// A rescan reads a transcript's first lines again only when it grew and
// had not named both its folder and its first prompt; what the last scan
// did not see is forgotten.
func TestScanReadsHeadsOnce(t *testing.T) {
	claudeDir, dir := t.TempDir(), t.TempDir()
	done, empty := claude.NewSessionID(), claude.NewSessionID()
	writeTranscript(t, claudeDir, dir, done, "the first prompt")
	pd, _ := claude.ProjectDir(claudeDir, dir)
	head, _ := json.Marshal(map[string]any{"type": "system", "cwd": dir, "sessionId": empty})
	os.WriteFile(claude.TranscriptPath(pd, empty), append(head, '\n'), 0o600)

	hs := heads{}
	cat, err := scan(claudeDir, hs)
	if err != nil || len(cat.folders) != 1 || len(cat.folders[0].Sessions) != 1 {
		t.Fatalf("first scan: %+v %v", cat.folders, err)
	}
	// The complete head is not read again (the file changed, not its
	// first lines); the one without a prompt is, once it grew.
	os.WriteFile(claude.TranscriptPath(pd, done), []byte("not json at all, and never read\n"), 0o600)
	line, _ := json.Marshal(map[string]any{"type": "user", "cwd": dir, "message": map[string]any{"role": "user", "content": "asked later"}})
	f, _ := os.OpenFile(claude.TranscriptPath(pd, empty), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(append(line, '\n'))
	f.Close()
	cat, err = scan(claudeDir, hs)
	if err != nil || len(cat.folders) != 1 || len(cat.folders[0].Sessions) != 2 {
		t.Fatalf("second scan: %+v %v", cat.folders, err)
	}
	prompts := map[string]string{}
	for _, p := range cat.folders[0].Sessions {
		prompts[p.ID] = p.Prompt
	}
	if prompts[done] != "the first prompt" || prompts[empty] != "asked later" {
		t.Fatalf("prompts %v", prompts)
	}
	os.Remove(claude.TranscriptPath(pd, empty))
	scan(claudeDir, hs)
	if len(hs) != 1 {
		t.Fatalf("%d heads kept, want 1", len(hs))
	}
}
