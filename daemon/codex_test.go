package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// A daemon with Codex installed says so (its version) and starts a Codex
// session as asked: ccrelay codex --remote in the folder, the model after
// --, the first prompt on stdin; a resume needs the thread's rollout, a
// new session a thread id Codex does not have; Claude Code's permission
// modes and unknown agents are refused. Without Codex, a Codex start is
// refused and nothing is announced.
func TestDaemonStartsCodex(t *testing.T) {
	claudeDir, known, codexHome := t.TempDir(), t.TempDir(), t.TempDir()
	writeTranscript(t, claudeDir, known, claude.NewSessionID(), "a Claude session")
	past := claude.NewSessionID()
	day := filepath.Join(codex.SessionsDir(codexHome), "2026", "11", "27")
	os.MkdirAll(day, 0o700)
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-11-27T15-46-37-"+past+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	r := startRig(t, Config{ClaudeDir: claudeDir, ClaudeVersion: "2.1.330", CodexVersion: "0.169.0", CodexHome: codexHome,
		CodexCommand: []string{self, "codex", "--relay", "http://127.0.0.1:1"}})
	if info := r.link.latest(); info.CodexVersion != "0.169.0" {
		t.Fatalf("announced %+v", info)
	}
	fresh := claude.NewSessionID()
	for _, tc := range []struct {
		name string
		cmd  protocol.Command
		want string
	}{
		{"unknown agent", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Text: "hi", Agent: "gemini"}, "not \"gemini\""},
		{"a Claude mode", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Text: "hi", Agent: "codex", Mode: "plan"}, "no permission mode"},
		{"model that is a flag", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Text: "hi", Agent: "codex", Model: "-x"}, "not a model name"},
		{"resume of nothing", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Resume: true, Agent: "codex"}, "no thread"},
		{"new with a past thread", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: past, Text: "hi", Agent: "codex"}, "exists already"},
		{"new without a prompt", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Agent: "codex"}, "first prompt"},
		{"new", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: fresh, Text: "say hi", Agent: "codex", Model: "gpt-5.5"}, ""},
		{"resume", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: past, Resume: true, Agent: "codex"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.link.send(t, r.session, tc.cmd)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
		})
	}
	waitFor(t, "two Codex sessions started", func() bool {
		n := 0
		for _, m := range r.log.records(t) {
			if m["line"] != nil {
				n++
			}
		}
		return n == 2
	})
	var args []string
	for _, m := range r.log.records(t) {
		if m["args"] != nil {
			args = append(args, fmt.Sprint(m["args"]))
		}
	}
	all := strings.Join(args, "\n")
	for _, want := range []string{"codex --relay http://127.0.0.1:1 --remote --daemon-pipe --session " + fresh + " --started-by " + r.session + " --daemon-report-fd 3 -- --model gpt-5.5",
		"codex --relay http://127.0.0.1:1 --remote --daemon-pipe --session " + past + " --started-by " + r.session + " --daemon-report-fd 3]"} {
		if !strings.Contains(all, want) {
			t.Errorf("no session started with %q:\n%s", want, all)
		}
	}
	if !strings.Contains(fmt.Sprint(r.log.records(t)), `"prompt":"say hi"`) {
		t.Fatalf("the first prompt did not reach the session's stdin: %v", r.log.records(t))
	}

	r2 := startRig(t, Config{ClaudeDir: claudeDir, ClaudeVersion: "2.1.330"})
	if info := r2.link.latest(); info.CodexVersion != "" {
		t.Fatalf("announced Codex without one: %+v", info)
	}
	if got := r2.link.send(t, r2.session, protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: claude.NewSessionID(), Text: "hi", Agent: "codex"}); !strings.Contains(got, "not installed") {
		t.Fatalf("a Codex start without Codex: %q", got)
	}
}

// A Codex session runs once however often the app asks for it: the
// session tells the daemon the id Codex gave its thread, which the daemon
// announces as running (and as the thread of the start's target); a start
// of that thread (Resume in the app's sheet, where the rollout is listed
// now) or the same start again (a phone's retry, under a new command id)
// while it runs is joined, not a second Codex on the same thread, before
// the thread is known too; another start under the same target is still
// refused; stop takes the thread's id too.
func TestDaemonCodexStartsOnce(t *testing.T) {
	if !reportPipes {
		t.Skip("a daemon on Windows passes sessions no report pipe: it knows a new Codex thread by its start's target only")
	}
	claudeDir, known, codexHome := t.TempDir(), t.TempDir(), t.TempDir()
	writeTranscript(t, claudeDir, known, claude.NewSessionID(), "a Claude session")
	thread := claude.NewSessionID()
	self, _ := os.Executable()
	r := startRig(t, Config{ClaudeDir: claudeDir, ClaudeVersion: "2.1.330", CodexVersion: "0.169.0", CodexHome: codexHome,
		CodexCommand: []string{self, "codex"}, Env: []string{"DAEMON_TEST_THREAD=" + thread}})
	target := claude.NewSessionID()
	start := protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: target, Text: "say hi", Agent: protocol.AgentCodex}
	if got := r.link.send(t, r.session, start); got != "" {
		t.Fatalf("start: %q", got)
	}
	// Tapped again at once: joined, whether or not the thread is known.
	if got := r.link.send(t, r.session, start); got != "" {
		t.Fatalf("the same start again: %q", got)
	}
	waitFor(t, "the thread announced as running", func() bool {
		info := r.link.latest()
		return slices.Contains(info.Running, thread) && slices.Contains(info.Running, target) && info.Threads[target] == thread
	})
	// Codex wrote the thread's rollout: the sheet lists it to resume.
	day := filepath.Join(codex.SessionsDir(codexHome), "2026", "11", "27")
	os.MkdirAll(day, 0o700)
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-11-27T15-46-37-"+thread+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cmd  protocol.Command
		want string
	}{
		{"resume of the running thread", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: thread, Resume: true, Agent: protocol.AgentCodex}, ""},
		{"the same start again", start, ""},
		{"another start under the target", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: target, Text: "something else", Agent: protocol.AgentCodex}, "already running"},
		{"a Claude start of the thread", protocol.Command{Kind: protocol.CommandStart, Dir: known, Target: thread, Resume: true}, "already running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cmd.ID = ""
			got := r.link.send(t, r.session, tc.cmd)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
		})
	}
	if got := r.link.send(t, r.session, protocol.Command{Kind: protocol.CommandStop, Target: thread}); got != "" {
		t.Fatalf("stop by the thread's id: %q", got)
	}
	waitFor(t, "the session stopped", func() bool {
		return strings.Contains(fmt.Sprint(r.log.records(t)), "end:stop") && len(r.link.latest().Running) == 0
	})
	starts := 0
	for _, m := range r.log.records(t) {
		if m["args"] != nil {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("%d Codex sessions started, want 1: %v", starts, r.log.records(t))
	}
}
