package launcher

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// Plan mode in remote mode: the request to leave it (ExitPlanMode) shows
// the app the plan it approves, though Claude Code 2.1.330 asks with an
// empty input (the plan is in the tool call only); once approved, the
// session's mode is Claude's new one at once, not at the next turn; live
// equals replay. Without the fix the app got {} and read "plan" until the
// next prompt.
func realClaudeRemotePlan(t *testing.T, in claudetest.Install) {
	const plan = "1. Make c.txt\n2. Say done"
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	e := claudetest.NewWith(t, in.Path,
		fakeapi.Rule{AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Text("Here is my plan."),
			fakeapi.ToolUse("ExitPlanMode", map[string]any{"plan": plan})}},
		fakeapi.Rule{AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("Plan approved; working.")}})
	rig := &remoteRig{t: t, out: &MemOutbox{}, ev: &events{}, home: e.Home, project: e.Project}
	opts := RemoteOptions{Claude: e.Claude, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second,
		Args: []string{"--permission-mode", "plan"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rig.r = NewRemote(claude.NewSessionID(), opts, NewPipeline("", rig.out), rig.ev)
	t.Cleanup(func() { rig.r.Stop(protocol.StatusCancelled) })
	rig.prompt("plan something")
	st := rig.untilState("the plan's approval request", func(s SessionState) bool { return len(s.Permissions) == 1 })
	p := st.Permissions[0]
	var input struct {
		Plan string `json:"plan"`
	}
	if err := json.Unmarshal(p.Input, &input); err != nil || p.Tool != "ExitPlanMode" || input.Plan != plan || p.Call == "" {
		t.Fatalf("request %+v, input %s: want ExitPlanMode with the plan", p, p.Input)
	}
	if st.PermissionMode != "plan" {
		t.Fatalf("mode %q while the plan waits, want plan", st.PermissionMode)
	}
	if err := rig.r.Answer(p.ID, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	d := rig.until("the turn", has("TE(", 1))
	wantInOrder(t, d, "U(plan something)", "TS", "A(Here is my plan.)", "TCS(", "TCE(", "A(Plan approved; working.)", "TE(completed)")
	if m := rig.ev.last().PermissionMode; m != "default" {
		t.Fatalf("mode %q after the plan was approved, want default", m)
	}
	sameAsReplay(t, rig, e, false)
}
