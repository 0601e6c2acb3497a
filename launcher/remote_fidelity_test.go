package launcher

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// usageOf describes an envelope's usage by the fields a reader sees.
func usageOf(e protocol.Envelope) string {
	u := e.Usage
	if u == nil {
		return "-"
	}
	n := func(p *int64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("in=%d out=%d cc=%s cr=%s tier=%q", u.InputTokens, u.OutputTokens, n(u.CacheCreationInputTokens), n(u.CacheReadInputTokens), u.ServiceTier)
}

// sameAsReplayExactly stops the session and checks that what remote mode
// sent equals the replay of the transcripts Claude wrote: same ids, same
// envelopes (details included) and the same usage, in the same order. The
// last turn-end, which the -p transcript cannot tell, is left out.
func sameAsReplayExactly(t *testing.T, rig *remoteRig, e *claudetest.Env) []string {
	t.Helper()
	rig.untilTranscriptHolds(e)
	rig.r.Stop(protocol.StatusCompleted)
	live := rig.checkTurns()
	want := replayFiles(t, filepath.Join(e.ProjectDir(t), rig.r.ID()+".jsonl"))
	if n := len(want); n > 0 && len(live) == n+1 && live[n].Ev.T == protocol.KindTurnEnd && want[n-1].Ev.T != protocol.KindTurnEnd {
		live = live[:n]
	}
	ld, wd := envtest.DescribeAll(live), envtest.DescribeAll(want)
	if len(live) != len(want) {
		t.Fatalf("live %d envelopes, replay %d\nlive:   %q\nreplay: %q", len(live), len(want), ld, wd)
	}
	for i := range live {
		if live[i].ID != want[i].ID || ld[i] != wd[i] {
			t.Fatalf("envelope %d: live %s (%s), replay %s (%s)\nlive:   %q\nreplay: %q", i, ld[i], live[i].ID, wd[i], want[i].ID, ld, wd)
		}
		if lu, wu := usageOf(live[i]), usageOf(want[i]); lu != wu {
			t.Fatalf("envelope %d %s: live usage %s, replay %s", i, ld[i], lu, wu)
		}
	}
	return ld
}

// A foreground subagent in remote mode: Claude prints its prompt (as text
// blocks) and its tool calls, but not its thinking and text, which only its
// transcript holds. Live equals replay: the prompt once with replay's id,
// the thinking and text in order, the final report, and every usage (the
// final one, not message_start's) (D22).
func TestRealClaudeRemoteForegroundSubagent(t *testing.T) {
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	rig, e := realRemote(t,
		fakeapi.Rule{Agent: "main", AfterToolResult: no, Times: 1, Reply: []fakeapi.Block{fakeapi.Text("Asking a helper."), fakeapi.ToolUse("Agent", map[string]any{
			"description": "Count files", "prompt": "SUBAGENT_TASK: count the files here", "subagent_type": "general-purpose", "run_in_background": false})}},
		fakeapi.Rule{Agent: "main", AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("The helper is done.")}},
		fakeapi.Rule{Agent: "subagent", AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Thinking("Sub thinks."), fakeapi.Text("Sub: listing."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "ls", "description": "List files"})}},
		fakeapi.Rule{Agent: "subagent", AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("Subagent: two files.")}})
	rig.prompt("spawn a helper")
	rig.until("the turn", func(d []string) bool {
		return count(d, "A(The helper is done.)") == 1 && strings.HasPrefix(d[len(d)-1], "TE(")
	})
	d := sameAsReplayExactly(t, rig, e)
	sub := "[sub=" + protocol.SubagentID("toolu_fake0001") + "]"
	wantInOrder(t, d, "U(spawn a helper)", "A(Asking a helper.)[usage]", "S(Count files)"+sub,
		"A(SUBAGENT_TASK: count the files here)"+sub, "A(Sub thinks.)"+sub+"[thinking][usage]", "A(Sub: listing.)"+sub,
		"TCS(toolu_fake0002,Bash", "TCE(toolu_fake0002)"+sub, "A(Subagent: two files.)"+sub+"[usage]", "P"+sub, "A(The helper is done.)[usage]")
	if n := count(d, "A(SUBAGENT_TASK"); n != 1 {
		t.Fatalf("the subagent's prompt %d times: %q", n, d)
	}
	for _, env := range rig.out.Envelopes() {
		if env.Usage != nil && env.Usage.OutputTokens != 7 {
			t.Fatalf("usage %s on %s: want the final output_tokens 7", usageOf(env), envtest.Describe(env))
		}
	}
}

// Claude killed while a tool runs: the call's result and the note say what
// happened (Claude exited, and how), the turn ends failed; the next prompt
// resumes the session, and live then equals replay of the transcript.
func TestRealClaudeRemoteKilledMidTool(t *testing.T) {
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	rig, e := realRemote(t,
		fakeapi.Rule{LastUserContains: "run it", AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Text("Running."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "timeout 20 tail -f /dev/null", "description": "Wait"})}},
		fakeapi.Rule{AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("After the tool.")}},
		fakeapi.Rule{LastUserContains: "again", Reply: []fakeapi.Block{fakeapi.Text("Back.")}})
	e.Extra = append(e.Extra, "IS_SANDBOX=1")
	rig.r.opts.Env = e.Environ()
	rig.r.opts.PermissionMode = "bypassPermissions"
	rig.r.state.PermissionMode = "bypassPermissions"
	rig.prompt("run it")
	rig.until("the tool call", has("TCS(toolu_fake0001", 1))
	// The call reaches stdout before the transcript: kill Claude only once
	// the transcript holds what live sent, or the resumed Claude knows
	// nothing of the call and live cannot equal replay.
	untilTranscriptHas(t, claude.TranscriptPath(e.ProjectDir(t), rig.r.ID()), rig.out.Envelopes)
	rig.r.mu.Lock()
	p := rig.r.proc
	rig.r.mu.Unlock()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d := rig.until("the failed turn", has("TE(failed)", 1))
	wantInOrder(t, d, "U(run it)", "TS", "A(Running.)", "TCS(toolu_fake0001 Bash)",
		`TCE(toolu_fake0001 error "Claude Code exited while this tool ran (signal: killed)`, "S(Claude Code stopped unexpectedly: signal: killed)", "TE(failed)")
	for _, s := range d {
		if strings.Contains(s, "interrupted by user") || strings.Contains(s, "Interrupted by user") {
			t.Fatalf("nobody interrupted: %q", d)
		}
	}
	rig.prompt("again")
	rig.until("the next turn", has("A(Back.)", 1))
	// The resumed Claude's repair of the call (its result, "No response
	// requested.", recorded and not printed) is its bookkeeping: the call
	// ended once, and live equals replay (ids, order, statuses).
	if n := count(rig.until("", has("A(Back.)", 1)), "TCE(toolu_fake0001"); n != 1 {
		t.Fatalf("the call ended %d times", n)
	}
	sameAsReplay(t, rig, e, false)
}
