package launcher

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/replay"
	"github.com/ccrelay/ccrelay/scanner"
)

// live follows one session with the scanner while Claude runs, mapping into
// a MemOutbox.
type live struct {
	sc     *scanner.Scanner
	out    *MemOutbox
	cancel context.CancelFunc
	done   chan error
}

func follow(t *testing.T, projectDir, session string) *live {
	out := &MemOutbox{}
	l := followPipeline(t, projectDir, NewPipeline(session, out))
	l.out = out
	l.sc.AddSession(session)
	return l
}

// followPipeline runs a scanner on projectDir feeding sink until the test
// ends (or stop is called).
func followPipeline(t *testing.T, projectDir string, sink scanner.Sink) *live {
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, PollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &live{sc: sc, cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- sc.Run(ctx) }()
	t.Cleanup(func() { l.stop(t) })
	return l
}

// settle waits for two more passes (everything on disk is read), then stops.
func (l *live) stop(t *testing.T) []protocol.Envelope {
	if l.cancel == nil {
		return l.envelopes()
	}
	for range 2 {
		select {
		case <-l.sc.Synced():
		case <-time.After(untilLimit):
			t.Fatal("scanner stalled")
		}
	}
	l.cancel()
	l.cancel = nil
	if err := <-l.done; err != nil {
		t.Fatal(err)
	}
	return l.envelopes()
}

func (l *live) envelopes() []protocol.Envelope {
	if l.out == nil {
		return nil
	}
	return l.out.Envelopes()
}

func replayFiles(t *testing.T, main string) []protocol.Envelope {
	s, err := replay.FindSession([]string{main})
	if err != nil {
		t.Fatal(err)
	}
	var envs []protocol.Envelope
	if _, err := replay.Run(context.Background(), s, replay.Options{}, func(e *protocol.Envelope) error {
		envs = append(envs, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return envs
}

// The real Claude Code 2.1.330, offline against the fake API: what the
// scanner and mapper produce while Claude writes equals the replay of the
// finished transcripts (same ids, same order).
func TestRealClaudeLiveEqualsReplay(t *testing.T) {
	afterResult, fresh := fakeapi.Bool(true), fakeapi.Bool(false)
	subagentWorks := make(chan struct{}) // see "background agent"
	scenarios := []struct {
		name  string
		rules []fakeapi.Rule
		run   func(t *testing.T, e *claudetest.Env, session string)
		want  []string // prefixes of the described envelopes
	}{
		{"plain reply", []fakeapi.Rule{{Reply: []fakeapi.Block{fakeapi.Text("hi there")}}},
			func(t *testing.T, e *claudetest.Env, s string) {
				e.Run(t, nil, "-p", "say hi", "--session-id", s, "--output-format", "stream-json", "--verbose")
			}, []string{"U(say hi)", "TS", "A(hi there)"}},
		{"tool round trip", []fakeapi.Rule{
			{AfterToolResult: fresh, Reply: []fakeapi.Block{fakeapi.Text("Listing."), fakeapi.ToolUse("Bash", map[string]any{"command": "ls", "description": "List files"})}},
			{AfterToolResult: afterResult, Reply: []fakeapi.Block{fakeapi.Text("Two files.")}}},
			func(t *testing.T, e *claudetest.Env, s string) {
				e.Run(t, nil, "-p", "list files", "--session-id", s, "--dangerously-skip-permissions", "--output-format", "stream-json", "--verbose")
			}, []string{"U(list files)", "TS", "A(Listing.)", "TCS(", "TCE(", "A(Two files.)"}},
		{"thinking", []fakeapi.Rule{{Reply: []fakeapi.Block{fakeapi.Thinking("Let me think."), fakeapi.Text("42")}}},
			func(t *testing.T, e *claudetest.Env, s string) {
				e.Run(t, nil, "-p", "think", "--session-id", s)
			}, []string{"U(think)", "TS", "A(Let me think.)[thinking]", "A(42)"}},
		{"background agent", []fakeapi.Rule{
			{Agent: "main", LastUserContains: "<task-notification>", Reply: []fakeapi.Block{fakeapi.Text("The helper is done.")}},
			{Agent: "main", AfterToolResult: fresh, Times: 1, Reply: []fakeapi.Block{fakeapi.ToolUse("Agent", map[string]any{
				"description": "Count files", "prompt": "SUBAGENT_TASK: count the files here", "subagent_type": "general-purpose"})}},
			{Agent: "main", AfterToolResult: afterResult, Reply: []fakeapi.Block{fakeapi.Text("Launched.")}},
			{Agent: "subagent", AfterToolResult: fresh, Hold: subagentWorks, Reply: []fakeapi.Block{fakeapi.ToolUse("Bash", map[string]any{"command": "ls", "description": "List files"})}},
			{Agent: "subagent", AfterToolResult: afterResult, Reply: []fakeapi.Block{fakeapi.Text("Subagent: two files.")}}},
			func(t *testing.T, e *claudetest.Env, s string) {
				// The subagent works once the main transcript holds
				// "Launched.": on a loaded machine Claude has written a
				// record more than the scanner's order window (500 ms,
				// decision L4) after its time, and the subagent's call,
				// later in time, was read and sent ahead of it.
				stop, watched := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(watched)
					defer close(subagentWorks)
					path := filepath.Join(e.ProjectDir(t), s+".jsonl")
					for {
						if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("Launched.")) {
							return
						}
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Millisecond): // polling the file
						}
					}
				}()
				defer func() { close(stop); <-watched }()
				e.Run(t, nil, "-p", "spawn a helper", "--session-id", s, "--dangerously-skip-permissions")
			}, nil},
		{"resume", []fakeapi.Rule{{Reply: []fakeapi.Block{fakeapi.Text("noted")}}},
			func(t *testing.T, e *claudetest.Env, s string) {
				e.Run(t, nil, "-p", "first", "--session-id", s)
				e.Run(t, nil, "-p", "second", "--resume", s)
			}, []string{"U(first)", "TS", "A(noted)", "TE(completed)", "U(second)", "TS", "A(noted)"}},
		{"two prompts in one session", []fakeapi.Rule{{Reply: []fakeapi.Block{fakeapi.Text("ack")}}},
			func(t *testing.T, e *claudetest.Env, s string) {
				in := `{"type":"user","message":{"role":"user","content":"one"}}` + "\n" +
					`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"two"}]}}` + "\n"
				e.Run(t, []byte(in), "-p", "--session-id", s, "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
			}, []string{"U(one)", "TS", "A(ack)", "TE(completed)", "U(two)", "TS", "A(ack)"}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			e := claudetest.New(t, sc.rules...)
			session := claude.NewSessionID()
			l := follow(t, e.ProjectDir(t), session)
			sc.run(t, e, session)
			got := l.stop(t)
			if sc.name == "background agent" {
				checkSubagentWork(t, got)
			}
			want := replayFiles(t, filepath.Join(e.ProjectDir(t), session+".jsonl"))
			envtest.CheckInvariants(t, got)
			gd, wd := envtest.DescribeAll(got), envtest.DescribeAll(want)
			if len(got) != len(want) {
				t.Fatalf("live %d envelopes, replay %d\nlive:   %v\nreplay: %v", len(got), len(want), gd, wd)
			}
			for i := range got {
				if got[i].ID != want[i].ID || gd[i] != wd[i] {
					t.Fatalf("envelope %d: live %s (%s), replay %s (%s)\nlive:   %v\nreplay: %v", i, gd[i], got[i].ID, wd[i], want[i].ID, gd, wd)
				}
			}
			for i, p := range sc.want {
				if i >= len(gd) || len(gd[i]) < len(p) || gd[i][:len(p)] != p {
					t.Fatalf("envelope %d: want prefix %s\nall: %v", i, p, gd)
				}
			}
			t.Logf("%s: %v", sc.name, gd)
		})
	}
}

// Subagent work done by the real Claude Code appears under its subagent id:
// the Agent call's id maps to the subagent, whose start carries the title and
// whose Bash call and result carry the subagent id.
func checkSubagentWork(t *testing.T, envs []protocol.Envelope) {
	t.Helper()
	var sub string
	var tool, stop, service bool
	for _, e := range envs {
		switch {
		case e.Ev.T == protocol.KindStart && e.Ev.Title == "Count files":
			sub = e.Subagent
		case e.Ev.T == protocol.KindToolCallStart && e.Ev.Name == "Bash":
			tool = sub != "" && e.Subagent == sub
		case e.Ev.T == protocol.KindStop:
			stop = sub != "" && e.Subagent == sub
		case e.Ev.T == protocol.KindService:
			service = e.Ev.Text == "Agent “Count files” completed"
		}
	}
	if sub == "" || !tool || !stop || !service {
		t.Fatalf("subagent work not attributed: start=%q tool=%v stop=%v service=%v\n%v", sub, tool, stop, service, envtest.DescribeAll(envs))
	}
}
