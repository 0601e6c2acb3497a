package launcher

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// liveEqualsReplay fails unless the live envelopes equal the replay ones:
// same ids, same descriptions (details included), same order.
func liveEqualsReplay(t *testing.T, got, want []protocol.Envelope) []string {
	t.Helper()
	envtest.CheckInvariants(t, got)
	gd, wd := envtest.DescribeAll(got), envtest.DescribeAll(want)
	if len(got) != len(want) {
		t.Fatalf("live %d envelopes, replay %d\nlive:   %q\nreplay: %q", len(got), len(want), gd, wd)
	}
	for i := range got {
		if got[i].ID != want[i].ID || gd[i] != wd[i] {
			t.Fatalf("envelope %d: live %s (%s), replay %s (%s)\nlive:   %q\nreplay: %q", i, gd[i], got[i].ID, wd[i], want[i].ID, gd, wd)
		}
	}
	return gd
}

// wantInOrder fails unless each of want is a prefix of a description, in
// this order.
func wantInOrder(t *testing.T, d []string, want ...string) {
	t.Helper()
	i := 0
	for _, s := range d {
		if i < len(want) && strings.HasPrefix(s, want[i]) {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("missing %q (in this order: %q)\nall: %q", want[i], want, d)
	}
}

// The real Claude Code, offline against the fake API made to fail: what the
// local-mode scanner and mapper produce while Claude writes equals replay of
// the transcript, retries leave a trace, and a turn that ends on an API
// error ends failed with the error as a service envelope (D18). max_tokens
// auto-continue stays one completed turn.
func apiErrorScenarios() []versionScenario {
	scenarios := []struct {
		name  string
		rules []fakeapi.Rule
		extra []string
		fails bool
		want  []string
		not   []string
	}{
		{"529 retried, then answered", []fakeapi.Rule{{Status: 529, Times: 2}, {Reply: []fakeapi.Block{fakeapi.Text("after retry")}}}, nil, false,
			[]string{"U(hello)", "TS", "SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]",
				"SVC(API error 529 (overloaded), retrying: attempt 2 of 10)[api=529,overloaded,retries=2,retrying=true]", "A(after retry)"},
			[]string{"TE(failed)"}},
		{"500 until Claude gives up", []fakeapi.Rule{{Status: 500}}, []string{"CLAUDE_CODE_MAX_RETRIES=1"}, true,
			[]string{"U(hello)", "TS", "SVC(API error 500 (server error), retrying: attempt 1 of 1)[api=500,server error,retries=1,retrying=true]",
				"SVC(API Error: 500 ", "TE(failed)"},
			[]string{"A(API Error"}},
		{"400, not retried", []fakeapi.Rule{{Status: 400}}, nil, true,
			[]string{"U(hello)", "TS", "SVC(API Error: 400 scripted error)[api=400,scripted error,retries=0,retrying=false]", "TE(failed)"},
			[]string{"A(API Error", "retrying=true"}},
		{"max_tokens auto-continue", []fakeapi.Rule{{Times: 1, StopReason: "max_tokens", Reply: []fakeapi.Block{fakeapi.Text("part one")}},
			{Reply: []fakeapi.Block{fakeapi.Text("part two")}}}, nil, false,
			[]string{"U(hello)", "TS", "A(part one)", "A(part two)"},
			[]string{"TE(", "SVC("}},
	}
	var out []versionScenario
	for _, sc := range scenarios {
		vs := versionScenario{name: "API error: " + sc.name, run: func(t *testing.T, in claudetest.Install) {
			e := claudetest.NewWith(t, in.Path, sc.rules...)
			e.Extra = sc.extra
			session := claude.NewSessionID()
			l := follow(t, e.ProjectDir(t), session)
			_, stderr, err := e.RunStatus(nil, "-p", "hello", "--session-id", session, "--output-format", "stream-json", "--verbose")
			if (err != nil) != sc.fails {
				t.Fatalf("claude exited with %v, want failure %v; stderr %s", err, sc.fails, stderr)
			}
			got := l.stop(t)
			want := replayFiles(t, filepath.Join(e.ProjectDir(t), session+".jsonl"))
			d := liveEqualsReplay(t, got, want)
			wants := sc.want
			if !hasRetryTrace(in.Version) {
				// Local mode reads the transcript, which has no retries.
				wants = slices.DeleteFunc(slices.Clone(wants), func(s string) bool { return strings.Contains(s, "retrying") })
			}
			wantInOrder(t, d, wants...)
			for _, n := range sc.not {
				for _, s := range d {
					if strings.Contains(s, n) {
						t.Fatalf("%q in %q", n, d)
					}
				}
			}
			t.Logf("%s: %q", sc.name, d)
		}}
		for _, w := range sc.want {
			if strings.Contains(w, "retrying=true") {
				vs.note = noRetryTrace
			}
		}
		out = append(out, vs)
	}
	return out
}

// The same in remote mode: the retries and the error come from stream-json
// (api_retry, the synthetic assistant message) and give the ids replay
// gives; the turn ends failed (D18), and the next prompt is answered in a
// turn of its own. Claude Code 2.1.197 writes the failed turn's retries to
// the transcript late, with the next prompt: they are not shown, live or
// replayed (before, replay made them a completed turn of their own, which
// live never had).
func realClaudeRemoteAPIError(t *testing.T, in claudetest.Install) {
	e := claudetest.NewWith(t, in.Path, fakeapi.Rule{Status: 529})
	e.Extra = []string{"CLAUDE_CODE_MAX_RETRIES=1"}
	rig := &remoteRig{t: t, out: &MemOutbox{}, ev: &events{}, home: e.Home, project: e.Project}
	opts := RemoteOptions{Claude: e.Claude, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rig.r = NewRemote(claude.NewSessionID(), opts, NewPipeline("", rig.out), rig.ev)
	t.Cleanup(func() { rig.r.Stop(protocol.StatusCancelled) })
	rig.prompt("hello")
	rig.until("failed turn", has("TE(", 1))
	e.API.SetRules(fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("answered now")}})
	rig.prompt("again")
	d := rig.until("second turn", has("TE(", 2))
	want := []string{"U(hello)", "TS", "S(API error 529 (overloaded), retrying: attempt 1 of 1)", "S(API Error: 529", "TE(failed)",
		"U(again)", "TS", "A(answered now)", "TE(completed)"}
	if !hasRetryTrace(in.Version) {
		want = slices.Delete(want, 2, 3)
		for _, s := range d {
			if strings.Contains(s, "retrying") {
				t.Fatalf("a retry written late shown live: %q", d)
			}
		}
	}
	wantInOrder(t, d, want...)
	sameAsReplay(t, rig, e, false)
}

// Compaction (D19): a manual /compact shows as a service envelope with the
// token counts, the command as the user's prompt with a command field, no
// markup anywhere; live equals replay.
func realClaudeCompaction(t *testing.T, in claudetest.Install) {
	e := claudetest.NewWith(t, in.Path, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("noted")}})
	session := claude.NewSessionID()
	l := follow(t, e.ProjectDir(t), session)
	e.Run(t, nil, "-p", "first", "--session-id", session)
	e.Run(t, nil, "-p", "/compact keep it short", "--resume", session)
	e.Run(t, nil, "-p", "after", "--resume", session)
	got := l.stop(t)
	want := replayFiles(t, filepath.Join(e.ProjectDir(t), session+".jsonl"))
	d := liveEqualsReplay(t, got, want)
	wantInOrder(t, d, "U(first)", "TS", "A(noted)", "TE(completed)", "TS", "SVC(Conversation compacted (", "TE(completed)",
		"U(/compact keep it short)[cmd=/compact|keep it short]", "U(after)", "TS", "A(noted)")
	for _, s := range d {
		if strings.Contains(s, "<command-") || strings.Contains(s, "<local-command") || strings.Contains(s, "This session is being continued") {
			t.Fatalf("markup or the compaction summary shown: %q", d)
		}
	}
	t.Logf("%q", d)
}

// Edit and Write results carry the diff (D20): Edit's structured patch,
// Write's create (the whole file) and update.
func realClaudeEditDiffs(t *testing.T, in claudetest.Install) {
	e := claudetest.NewWith(t, in.Path)
	p := func(f string) string { return filepath.Join(e.Project, f) }
	e.API.SetRules(
		fakeapi.Rule{AfterToolResult: fakeapi.Bool(false), Times: 1, Reply: []fakeapi.Block{fakeapi.ToolUse("Read", map[string]any{"file_path": p("a.txt")})}},
		fakeapi.Rule{Times: 1, Reply: []fakeapi.Block{fakeapi.ToolUse("Edit", map[string]any{"file_path": p("a.txt"), "old_string": "a.txt", "new_string": "A line\nsecond"})}},
		fakeapi.Rule{Times: 1, Reply: []fakeapi.Block{fakeapi.ToolUse("Write", map[string]any{"file_path": p("c.txt"), "content": "new file\nline 2\n"})}},
		fakeapi.Rule{Times: 1, Reply: []fakeapi.Block{fakeapi.ToolUse("Read", map[string]any{"file_path": p("b.txt")})}},
		fakeapi.Rule{Times: 1, Reply: []fakeapi.Block{fakeapi.ToolUse("Write", map[string]any{"file_path": p("b.txt"), "content": "b rewritten\n"})}},
		fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("done")}})
	session := claude.NewSessionID()
	l := follow(t, e.ProjectDir(t), session)
	e.Run(t, nil, "-p", "edit files", "--session-id", session, "--dangerously-skip-permissions")
	got := l.stop(t)
	want := replayFiles(t, filepath.Join(e.ProjectDir(t), session+".jsonl"))
	d := liveEqualsReplay(t, got, want)
	wantInOrder(t, d, "U(edit files)", "TS", "TCS(", "TCE(",
		"TCS(", "TCE(toolu_fake0002)[result=The file "+p("a.txt")+" has been updated", // then:
	)
	var diffs []string
	for _, env := range got {
		if df := env.Ev.Diff; df != nil {
			var lines []string
			for _, h := range df.Hunks {
				lines = append(lines, h.Lines...)
			}
			diffs = append(diffs, df.Op+" "+filepath.Base(df.Path)+" "+strings.Join(lines, "|"))
		}
	}
	wantDiffs := []string{"update a.txt -a.txt|+A line|+second", "create c.txt +new file|+line 2", "update b.txt -b.txt|+b rewritten"}
	if !slices.Equal(diffs, wantDiffs) {
		t.Fatalf("diffs %q, want %q", diffs, wantDiffs)
	}
}

// lockedOutbox keeps envelopes per session.
type lockedOutbox struct {
	mu   sync.Mutex
	envs map[string][]protocol.Envelope
}

func (o *lockedOutbox) Append(_ context.Context, session string, envs []protocol.Envelope) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.envs == nil {
		o.envs = map[string][]protocol.Envelope{}
	}
	o.envs[session] = append(o.envs[session], envs...)
	return nil
}

// all is every session's envelopes.
func (o *lockedOutbox) all() []protocol.Envelope {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []protocol.Envelope
	for _, envs := range o.envs {
		out = append(out, envs...)
	}
	return out
}

func (o *lockedOutbox) of(session string) []protocol.Envelope {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]protocol.Envelope(nil), o.envs[session]...)
}

// A forked session (--fork-session) copies its parent's records with their
// uuids into a file of its own: its relay session shows that history, like
// replay of the fork's transcript, even when the parent was followed by the
// same scanner (D21).
func realClaudeFork(t *testing.T, in claudetest.Install) {
	e := claudetest.NewWith(t, in.Path, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("noted")}})
	parent := claude.NewSessionID()
	out := &lockedOutbox{}
	l := followPipeline(t, e.ProjectDir(t), NewPipeline("", out))
	l.sc.AddSession(parent)
	e.Run(t, nil, "-p", "first", "--session-id", parent)
	// Let the scanner read the parent before the fork exists.
	deadline := time.Now().Add(30 * time.Second)
	for len(out.of(parent)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("parent not followed: %q", envtest.DescribeAll(out.of(parent)))
		}
		<-l.sc.Synced()
	}
	before, err := filepath.Glob(filepath.Join(e.ProjectDir(t), "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	e.Run(t, nil, "-p", "second", "--resume", parent, "--fork-session")
	after, _ := filepath.Glob(filepath.Join(e.ProjectDir(t), "*.jsonl"))
	var fork string
	for _, f := range after {
		if !slices.Contains(before, f) {
			fork = strings.TrimSuffix(filepath.Base(f), ".jsonl")
		}
	}
	if fork == "" || fork == parent {
		t.Fatalf("no fork file: before %v, after %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(e.ProjectDir(t), parent+".jsonl")); err != nil {
		t.Fatal(err)
	}
	l.sc.AddSession(fork)
	deadline = time.Now().Add(30 * time.Second)
	for len(out.of(fork)) < 6 {
		if time.Now().After(deadline) {
			break
		}
		<-l.sc.Synced()
	}
	l.stop(t)
	want := replayFiles(t, filepath.Join(e.ProjectDir(t), fork+".jsonl"))
	d := liveEqualsReplay(t, out.of(fork), want)
	wantInOrder(t, d, "U(first)", "TS", "A(noted)", "TE(completed)", "U(second)", "TS", "A(noted)")
	// The parent is unchanged: the fork wrote nothing into it.
	pd := envtest.DescribeAll(out.of(parent))
	if !slices.Equal(pd, []string{"U(first)", "TS", "A(noted)[usage]"}) {
		t.Fatalf("parent %q", pd)
	}
}
