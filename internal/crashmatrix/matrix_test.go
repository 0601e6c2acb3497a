//go:build linux

package crashmatrix

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// phase is a point of a session's first turn where something is killed:
// how the rig is set up for it, the fake API's rules for the first prompt,
// and how the test knows Claude is there.
type phase struct {
	name  string
	setup func(r *rig)
	rules func(r *rig) []fakeapi.Rule
	reach func(r *rig)
}

// streamed is what the streaming phase's reply streams before its hold
// (the first half of its text).
const streamed = "streaming the first answer, "

func answerFirst(*rig) []fakeapi.Rule {
	return []fakeapi.Rule{{LastUserContains: firstPrompt, Reply: []fakeapi.Block{fakeapi.Text(firstAnswer)}}}
}

// toolRules: the first prompt is answered with a Bash call that asks for
// permission and then runs until the test releases it.
func toolRules(r *rig) []fakeapi.Rule {
	return []fakeapi.Rule{{LastUserContains: firstPrompt, AfterToolResult: fakeapi.Bool(false), Times: 1, Reply: []fakeapi.Block{
		fakeapi.Text("Running it."), fakeapi.ToolUse("Bash", map[string]any{"command": r.gate("tool"), "description": "Wait for the test"})}}}
}

// waitPermission waits until the phone is asked for the tool call's
// permission and Claude wrote the call in its transcript.
func waitPermission(r *rig) {
	r.phone.until("a permission request", func() bool { return len(r.permissions()) > 0 })
	r.phone.until("the tool call in the transcript", func() bool { return r.transcriptHas(`"type":"tool_use"`) })
}

// waitHeld waits until Claude took the first prompt (wrote it in its
// transcript) and waits for the model's reply, which the API holds.
func waitHeld(r *rig) {
	r.phone.until("the model's reply held", func() bool { return r.env.API.Held() > 0 })
	r.phone.until("the prompt in the transcript", func() bool { return r.transcriptHas(firstPrompt) })
}

var phases = []phase{
	{name: "before-init", setup: (*rig).holdAtSessionStart, rules: answerFirst,
		reach: func(r *rig) { r.reached("start.reached") }},
	{name: "after-init-before-transcript", setup: (*rig).stopAtInit, rules: answerFirst,
		reach: func(r *rig) { r.reached("init.stopped") }},
	{name: "waiting-for-model", rules: func(r *rig) []fakeapi.Rule {
		return []fakeapi.Rule{{LastUserContains: firstPrompt, Times: 1, Hold: r.hold, Reply: []fakeapi.Block{fakeapi.Text(firstAnswer)}}}
	}, reach: waitHeld},
	{name: "streaming", rules: func(r *rig) []fakeapi.Rule {
		return []fakeapi.Rule{{LastUserContains: firstPrompt, Times: 1, Hold: r.hold, HoldMidStream: true,
			Reply: []fakeapi.Block{fakeapi.Text(streamed + "which the test holds half way")}}}
	}, reach: func(r *rig) {
		waitHeld(r)
		r.phone.until("the first half streamed to the phone", func() bool {
			return slices.ContainsFunc(r.phone.live, func(p string) bool { return strings.Contains(p, "first answer") })
		})
	}},
	{name: "mid-tool", rules: toolRules, reach: func(r *rig) {
		waitPermission(r)
		id := r.phone.command(r.session, protocol.Command{Kind: protocol.CommandPermission, RequestID: r.permissions()[0], Allow: true})
		r.phone.answered(id)
		r.reached("tool.reached")
	}},
	{name: "waiting-for-permission", rules: toolRules, reach: waitPermission},
}

// matrix is the cases TestCrashMatrix runs: who is killed (Claude in
// remote mode, ccrelay --remote, or the daemon of a session started from
// the phone; claude-then-prompt: Claude, with the next prompt sent at
// once) and the phase it is killed at.
var matrix = []struct{ who, phase string }{
	{"claude", "before-init"},
	{"claude", "after-init-before-transcript"},
	{"claude", "waiting-for-model"},
	{"claude", "streaming"},
	{"claude", "mid-tool"},
	{"claude", "waiting-for-permission"},
	{"ccrelay", "before-init"},
	{"ccrelay", "after-init-before-transcript"},
	{"ccrelay", "waiting-for-model"},
	{"ccrelay", "streaming"},
	{"ccrelay", "mid-tool"},
	{"ccrelay", "waiting-for-permission"},
	{"daemon", "before-init"},
	{"daemon", "after-init-before-transcript"},
	{"daemon", "waiting-for-model"},
	{"daemon", "streaming"},
	{"daemon", "mid-tool"},
	{"daemon", "waiting-for-permission"},
	{"claude-then-prompt", "waiting-for-model"},
	{"claude-then-prompt", "mid-tool"},
}

// The crash matrix: the real Claude Code under ccrelay, with Claude,
// ccrelay (remote mode) or the daemon killed (SIGKILL) at each phase of
// the first turn; the session then goes on (ccrelay or the daemon started
// again where it died) and the phone's next prompt is answered. Each case
// ends with check: live = replay, one end per tool call, at most one open
// turn, every command's status final and true, the list status idle; and
// while no Claude runs, the list never says busy.
func TestCrashMatrix(t *testing.T) {
	byName := map[string]phase{}
	for _, ph := range phases {
		byName[ph.name] = ph
	}
	for _, in := range claudetest.Installs(t) {
		for _, c := range matrix {
			ph, ok := byName[c.phase]
			if !ok {
				t.Fatalf("no phase %q", c.phase)
			}
			t.Run(in.Version+"/"+c.who+"/"+c.phase, func(t *testing.T) {
				t.Parallel()
				crashCase(t, in.Path, c.who, ph)
			})
		}
	}
}

func crashCase(t *testing.T, claudeBin, who string, ph phase) {
	var r *rig
	for attempt := 1; ; attempt++ {
		r = newRig(t, claudeBin, who == "daemon")
		if ph.setup != nil {
			ph.setup(r)
		}
		r.setRules(ph.rules(r)...)
		r.startSession(firstPrompt)
		ph.reach(r)
		// Claude writes its transcript about 100 ms after it prints init:
		// on a busy machine initstop may stop it too late. Such an
		// attempt missed its phase, and the case starts again.
		_, err := os.Stat(filepath.Join(r.env.ProjectDir(t), r.session+".jsonl"))
		if ph.name != "after-init-before-transcript" || err != nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("Claude had written its transcript when it was stopped at init, %d times", attempt)
		}
		t.Logf("attempt %d: Claude had written its transcript when it was stopped at init; again", attempt)
		r.killClaude()
		r.stop()
	}
	switch who {
	case "claude":
		r.killClaude()
		r.release()
		r.notBusyWithoutClaude("Claude killed")
	case "claude-then-prompt":
		// The phone's next prompt comes at once, while ccrelay may not
		// have noticed Claude's death yet.
		r.killClaude()
		r.release()
	case "ccrelay":
		pid := r.claudePID()
		r.killProc()
		r.phone.until("Claude gone with ccrelay", func() bool { return pid == 0 || !alive(pid) })
		r.release()
		r.startRemote()
	case "daemon":
		under := descendants(r.proc.Process.Pid)
		r.killProc()
		if !r.phone.within("the daemon's sessions gone", 30*time.Second, func() bool {
			for _, p := range under {
				if alive(p) {
					return false
				}
			}
			return true
		}) {
			t.Errorf("processes of the daemon's session outlived it by 30 s")
		}
		r.release()
		r.startDaemon()
		r.waitMachine()
		r.notBusyWithoutClaude("the daemon killed")
	}
	if who == "daemon" {
		r.daemonNext()
	} else {
		r.nextAnswered()
	}
	r.check()
}
