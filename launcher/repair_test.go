package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// The app takes the session over while the terminal's Claude runs a Bash
// call: the call ends once (not never), the turn ends failed with a note,
// and what the resumed Claude records about it (the call's result, "No
// response requested.", which it does not print) maps to the same ids:
// live equals replay.
func TestSwitchMidToolEndsCallOnce(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	stream := filepath.Join(t.TempDir(), "stream.json")
	const sess = "77777777-2222-4333-8444-666666666666"
	line := func(v map[string]any) string {
		v["sessionId"] = "{{session}}"
		v["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
		b, _ := json.Marshal(v)
		return string(b)
	}
	writeJSON(t, local, map[string]any{"lines": []string{
		line(map[string]any{"type": "user", "uuid": "lu-{{source}}", "message": map[string]any{"role": "user", "content": "run it"}}),
		line(map[string]any{"type": "assistant", "uuid": "la-{{source}}", "message": map[string]any{"id": "msg-la", "role": "assistant", "content": []any{
			map[string]any{"type": "tool_use", "id": "toolu_bash", "name": "Bash", "input": map[string]any{"command": "sleep 60"}}}}}),
	}, "intervalMs": 1, "hang": true})
	writeJSON(t, stream, map[string]any{"repair": true, "turns": []any{steps(map[string]any{"text": "remote answer"})}})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local, "FAKE_CLAUDE_STREAM=" + stream}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	sr := startScan(t, home, project, out, log)
	pipe, projectDir := sr.pipe, sr.projectDir
	cmds := make(chan Command)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: pipe, Scanner: sr.sc, Commands: cmds, Events: ev, Logger: log,
	})
	rig := &remoteRig{t: t, out: out, ev: ev}
	rig.until("the Bash call", has("TCS(toolu_bash Bash)", 1))
	replies := sendPrompt(cmds, protocol.New(), "from the app")
	if err := <-replies; err != nil {
		t.Fatalf("prompt rejected: %v", err)
	}
	rig.until("the remote turn's end", has("TE(completed)", 1))
	transcript := filepath.Join(projectDir, sess+".jsonl")
	if b, _ := os.ReadFile(transcript); !strings.Contains(string(b), claude.NoResponseText) {
		t.Fatalf("the resumed Claude recorded no repair:\n%s", b)
	}
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	live := out.Envelopes()
	envtest.CheckInvariants(t, live)
	got := describeAll(live)
	if n := count(got, "TCE(toolu_bash"); n != 1 {
		t.Fatalf("the Bash call ended %d times: %q", n, got)
	}
	wantInOrder(t, got, "U(run it)", "TS", "TCS(toolu_bash Bash)", "TCE(toolu_bash error", "S(Claude Code in the terminal was stopped", "TE(failed)",
		"U(from the app)", "TS", "A(remote answer)", "TE(completed)")
	if n := count(got, "TS"); n != 2 {
		t.Fatalf("%d turns: %q", n, got)
	}
	// Replay of the transcript: the same envelopes (ids, order, statuses),
	// the call's result and the note worded from the transcript.
	want := replayFiles(t, transcript)
	exp := describeAll(want)
	if len(live) < len(want) {
		t.Fatalf("live has %d envelopes, replay %d\nlive %q\nreplay %q", len(live), len(want), got, exp)
	}
	for i := range want {
		if want[i].ID != live[i].ID || want[i].Ev.Status != live[i].Ev.Status {
			t.Fatalf("envelope %d: live %s, replay %s\nlive %q\nreplay %q", i, got[i], exp[i], got, exp)
		}
	}
}

// What a resumed Claude records and does not print (its repair of a call
// the Claude before it left) is not dropped after the hold: the mapper
// gets it, and the call ends once, whoever brings the repair first.
func TestRemoteHoldPassesRepairToMapper(t *testing.T) {
	const sess = "88888888-2222-4333-8444-666666666666"
	ctx := context.Background()
	parse := func(line string) *claude.Record {
		r, err := claude.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	prompt := parse(`{"type":"user","uuid":"p1","sessionId":"` + sess + `","message":{"role":"user","content":"run it"}}`)
	call := parse(`{"type":"assistant","uuid":"a1","sessionId":"` + sess + `","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"sleep 60"}}]}}`)
	fixed := parse(`{"type":"user","uuid":"r1","sessionId":"` + sess + `","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown.]"}]}}`)
	none := parse(`{"type":"assistant","uuid":"n1","sessionId":"` + sess + `","message":{"id":"x1","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}`)
	out := &MemOutbox{}
	p := NewPipeline("", out)
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	p.SetRemote(sess, true)
	if err := p.MapRecords(ctx, sess, []*claude.Record{prompt, call}); err != nil {
		t.Fatal(err)
	}
	b := scanner.Batch{Session: sess, Records: []scanner.Record{{Record: fixed}, {Record: none}}}
	if err := p.Deliver(ctx, b); !errors.Is(err, scanner.ErrHold) {
		t.Fatalf("%v, want ErrHold", err)
	}
	now = now.Add(RemoteHoldWindow)
	if err := p.Deliver(ctx, b); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	want := []string{"U(run it)", "TS", "TCS(toolu_1 Bash)",
		`TCE(toolu_1 error "[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown.]")`,
		"S(" + mapper.CutNote + ")", "TE(failed)"}
	envs := out.Envelopes()
	envtest.CheckInvariants(t, envs)
	envtest.Eq(t, describeAll(envs), want...)
	// Remote mode reads the same repair later: nothing more.
	if err := p.MapRecords(ctx, sess, []*claude.Record{fixed, none}); err != nil {
		t.Fatal(err)
	}
	envtest.Eq(t, describeAll(out.Envelopes()), want...)
}

// The session goes back to the terminal while a remote Bash call runs: the
// call ends once, interrupted, in the turn that ends cancelled, with the
// id replay gives it from what the terminal's Claude records when it
// resumes (its repair of the call), which adds nothing.
func TestStopMidToolEndsCallAsReplay(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(longTool("toolu_long"))}}, RemoteOptions{})
	rig.prompt("run it")
	rig.until("the call", has("TCS(toolu_long Bash)", 1))
	rig.r.Stop(protocol.StatusCancelled)
	projectDir, err := claude.ProjectDir(filepath.Join(rig.home, ".claude"), rig.project)
	if err != nil {
		t.Fatal(err)
	}
	path := claude.TranscriptPath(projectDir, rigSession)
	// The terminal's Claude resumes the session: its repair of the call.
	repair := []string{
		`{"type":"user","uuid":"r1","sessionId":"` + rigSession + `","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_long","is_error":true,"content":"[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown.]"}]}}`,
		`{"type":"assistant","uuid":"n1","sessionId":"` + rigSession + `","message":{"id":"x1","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}`,
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := scanner.Batch{Session: rigSession}
	for _, l := range repair {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
		r, err := claude.Parse([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		b.Records = append(b.Records, scanner.Record{Record: r})
	}
	f.Close()
	if err := rig.r.feed.(*Pipeline).Deliver(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	live := rig.checkTurns()
	d := describeAll(live)
	if n := count(d, "TCE(toolu_long"); n != 1 {
		t.Fatalf("the call ended %d times: %q", n, d)
	}
	wantInOrder(t, d, "U(run it)", "TS", "TCS(toolu_long Bash)", `TCE(toolu_long error "[Request interrupted by user for tool use]")`, "TE(cancelled)")
	var end string
	for _, e := range replayFiles(t, path) {
		if e.Ev.T == protocol.KindToolCallEnd && e.Ev.Call == "toolu_long" {
			end = e.ID
		}
	}
	for _, e := range live {
		if e.Ev.T == protocol.KindToolCallEnd && e.ID != end {
			t.Fatalf("the call's end %s, replay's %s", e.ID, end)
		}
	}
}

// Claude is stopped while it runs a tool, and as the SIGTERM ends it, it
// prints the tool's result and exits without writing it to its transcript
// (Claude Code 2.1.330, stopped with the daemon that ran its session, at
// times: "Exit code 137"). The resumed Claude does not know that result:
// it records its repair of the call, and replay ends the call with it. The
// call ends once, with replay's id (the cut's, not the printed result's),
// and everything the app got is in replay, in replay's order.
func TestStopMidToolResultPrintedNotWritten(t *testing.T) {
	tool := longTool("toolu_long")
	tool["tool"].(map[string]any)["termResult"] = "Exit code 137"
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(tool)}}, RemoteOptions{})
	rig.prompt("run it")
	rig.until("the call", has("TCS(toolu_long Bash)", 1))
	if !rig.r.StopCut(mapper.Cut{Status: protocol.StatusFailed, Result: "stopped with the session; the tool did not finish.",
		Note: "The session was stopped."}) {
		t.Fatal("no turn was open when Claude was stopped")
	}
	path := claude.TranscriptPath(rig.r.opts.ProjectDir, rigSession)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "Exit code 137") {
		t.Fatal("the fake Claude wrote the result it prints when it is stopped")
	}
	// The resumed Claude's repair of the call.
	repair := `{"type":"user","uuid":"r1","sessionId":"` + rigSession + `","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_long","is_error":true,"content":"[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown.]"}]}}` + "\n" +
		`{"type":"assistant","uuid":"n1","sessionId":"` + rigSession + `","message":{"id":"x1","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}` + "\n"
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(repair); err != nil {
		t.Fatal(err)
	}
	f.Close()
	live := rig.checkTurns()
	d := describeAll(live)
	if n := count(d, "TCE(toolu_long"); n != 1 {
		t.Fatalf("the call ended %d times: %q", n, d)
	}
	want := replayFiles(t, path)
	at := map[string]int{}
	for i, e := range want {
		at[e.ID] = i
	}
	last := -1
	for i, e := range live {
		j, ok := at[e.ID]
		if !ok {
			t.Errorf("live envelope %d (%s) is not in replay\nlive:   %q\nreplay: %q", i, d[i], d, describeAll(want))
			continue
		}
		if j < last {
			t.Errorf("live envelope %d (%s) comes in another order than in replay", i, d[i])
		}
		last = j
	}
}
