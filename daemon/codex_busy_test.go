package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// A Codex thread that a ccrelay runs already (its lock held) is not
// resumed again: a new thread the daemon started runs under the id Codex
// chose, which its children do not know it by, and the app lists it as a
// past session of its folder. Once it stops, it resumes.
func TestDaemonCodexResumeOfRunningThread(t *testing.T) {
	claudeDir, known, codexHome, state := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	writeTranscript(t, claudeDir, known, claude.NewSessionID(), "a Claude session")
	running := claude.NewSessionID()
	day := filepath.Join(codex.SessionsDir(codexHome), "2026", "11", "27")
	os.MkdirAll(day, 0o700)
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-11-27T15-46-37-"+running+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	r := startRig(t, Config{ClaudeDir: claudeDir, ClaudeVersion: "2.1.330", CodexVersion: "0.169.0", CodexHome: codexHome,
		CodexCommand: []string{self, "codex", "--relay", "http://127.0.0.1:1"},
		CodexBusy:    func(thread string) bool { return launcher.CodexThreadBusy(state, thread) }})
	lock, err := launcher.LockCodexThread(state, running) // the ccrelay that runs it
	if err != nil {
		t.Fatal(err)
	}
	resume := protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: running, Resume: true, Agent: protocol.AgentCodex}
	if got := r.link.send(t, r.session, resume); !strings.Contains(got, "already running") {
		t.Fatalf("a resume of a running thread: %q", got)
	}
	lock.Release()
	if got := r.link.send(t, r.session, resume); got != "" {
		t.Fatalf("a resume once it stopped: %q", got)
	}
}
