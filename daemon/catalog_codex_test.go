package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// writeCodexRollout copies the real Codex 0.169.0 rollout fixture name into
// codexHome's sessions as it would be on disk, with its cwd made dir and
// its last change at.
func writeCodexRollout(t *testing.T, codexHome, name, dir string, at time.Time) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "codex", "testdata", "0.169.0", name))
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.ReplaceAll(string(b), `"/home/user/proj`, `"`+dir))
	r, err := codex.Parse(b[:strings.IndexByte(string(b), '\n')])
	if err != nil || r.SessionMeta == nil {
		t.Fatalf("%s: %v", name, err)
	}
	day := codex.DayDir(codexHome, at)
	if err := os.MkdirAll(day, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(day, "rollout-"+at.Format("2006-01-02T15-04-05")+"-"+r.SessionMeta.ID+".jsonl")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	return r.SessionMeta.ID
}

// The daemon's info lists Codex's threads beside Claude Code's sessions,
// with agent codex: in a folder Claude Code knows, among its sessions by
// their last change; in a folder only Codex knows, as a folder of its own.
// A subagent's thread is not listed (it is resumed with its parent's).
// Without Codex installed, no thread of Codex's is listed.
func TestDaemonListsCodexThreads(t *testing.T) {
	claudeDir, both, codexOnly, codexHome := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	claudeID := claude.NewSessionID()
	writeTranscript(t, claudeDir, both, claudeID, "a Claude session")
	now := time.Now()
	text := writeCodexRollout(t, codexHome, "exec_text.jsonl", codexOnly, now.Add(-2*time.Hour))
	parent := writeCodexRollout(t, codexHome, "exec_subagent.jsonl", both, now.Add(time.Hour))
	writeCodexRollout(t, codexHome, "exec_subagent.2.jsonl", both, now.Add(time.Hour))

	self, _ := os.Executable()
	r := startRig(t, Config{ClaudeDir: claudeDir, ClaudeVersion: "2.1.330", CodexVersion: "0.169.0", CodexHome: codexHome,
		CodexCommand: []string{self, "codex"}})
	folders := map[string][]protocol.PastSession{}
	var order []string
	for _, f := range r.link.latest().Folders {
		folders[f.Dir] = f.Sessions
		order = append(order, f.Dir)
	}
	want := map[string][]protocol.PastSession{
		both:      {{ID: parent, Prompt: "SUBAGENT: ask a helper", Agent: protocol.AgentCodex}, {ID: claudeID, Prompt: "a Claude session"}},
		codexOnly: {{ID: text, Prompt: "say hi", Agent: protocol.AgentCodex}},
	}
	for dir, w := range want {
		got := folders[dir]
		if len(got) != len(w) {
			t.Fatalf("folder %s: %+v, want %+v (folders %v)", dir, got, w, order)
		}
		for i := range w {
			if got[i].ID != w[i].ID || got[i].Prompt != w[i].Prompt || got[i].Agent != w[i].Agent || got[i].At == 0 {
				t.Fatalf("folder %s session %d: %+v, want %+v", dir, i, got[i], w[i])
			}
		}
	}
	if len(order) != 2 || order[0] != both {
		t.Fatalf("folders %v, want %s first (its latest change)", order, both)
	}
	r.stop()

	r2 := startRig(t, Config{ClaudeDir: claudeDir, ClaudeVersion: "2.1.330", CodexHome: codexHome})
	for _, f := range r2.link.latest().Folders {
		for _, s := range f.Sessions {
			if s.Agent != "" || f.Dir == codexOnly {
				t.Fatalf("without Codex: %+v", f)
			}
		}
	}
}
