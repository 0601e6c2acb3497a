package launcher

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/replay"
)

// realRemote drives the real Claude Code in remote mode against the fake
// API.
func realRemote(t *testing.T, rules ...fakeapi.Rule) (*remoteRig, *claudetest.Env) {
	e := claudetest.New(t, rules...)
	rig := &remoteRig{t: t, out: &MemOutbox{}, ev: &events{}, home: e.Home, project: e.Project}
	opts := RemoteOptions{Claude: e.Claude, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rig.r = NewRemote(claude.NewSessionID(), opts, NewPipeline("", rig.out), rig.ev)
	t.Cleanup(func() { rig.r.Stop(protocol.StatusCancelled) })
	return rig, e
}

// sameAsReplay checks that what remote mode sent equals the replay of the
// transcript Claude wrote: same ids, same order, same statuses. With contentOnly, turn
// markers are left out of the comparison (see the background subagent
// case).
func sameAsReplay(t *testing.T, rig *remoteRig, e *claudetest.Env, contentOnly bool) {
	t.Helper()
	rig.untilTranscriptHolds(e)
	rig.r.Stop(protocol.StatusCompleted)
	live := rig.checkTurns()
	want := replayFiles(t, filepath.Join(e.ProjectDir(t), rig.r.ID()+".jsonl"))
	if contentOnly {
		live, want = withoutTurnMarkers(live), withoutTurnMarkers(want)
	}
	if n := len(want); n > 0 && len(live) == n+1 && live[n].Ev.T == protocol.KindTurnEnd && want[n-1].Ev.T != protocol.KindTurnEnd {
		// The -p transcript does not say that its last turn ended (only
		// the next prompt would); the live stream knows from Claude's
		// result.
		live = live[:n]
	}
	ld, wd := describeAll(live), describeAll(want)
	if len(live) != len(want) {
		t.Fatalf("live %d envelopes, replay %d\nlive:   %q\nreplay: %q", len(live), len(want), ld, wd)
	}
	for i := range live {
		if live[i].ID != want[i].ID || live[i].Ev.T != want[i].Ev.T || live[i].Ev.Status != want[i].Ev.Status {
			t.Fatalf("envelope %d: live %s (%s), replay %s (%s)\nlive:   %q\nreplay: %q", i, ld[i], live[i].ID, wd[i], want[i].ID, ld, wd)
		}
	}
	t.Logf("live = replay: %q", ld)
}

// untilTranscriptHolds waits until the replay of the session's transcript
// holds every message live has sent (turn markers aside): Claude writes its
// transcript in batches, after it prints, and a Claude stopped before it
// wrote a batch never writes it. Past a generous deadline it returns, and
// the comparison that follows says what is missing.
func (rig *remoteRig) untilTranscriptHolds(e *claudetest.Env) {
	rig.t.Helper()
	untilTranscriptHas(rig.t, filepath.Join(e.ProjectDir(rig.t), rig.r.ID()+".jsonl"), rig.out.Envelopes)
}

// untilTranscriptHas waits until the replay of the transcript at path holds
// every message of live() (turn markers aside), as untilTranscriptHolds:
// before Claude is killed or stopped, when what follows compares live with
// the transcript.
func untilTranscriptHas(t *testing.T, path string, live func() []protocol.Envelope) {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(30 * time.Second)
	for polls := 1; ; polls++ {
		missing := transcriptLacks(path, live())
		if missing == 0 {
			t.Logf("the transcript held what live sent after %v (%d looks)", time.Since(begin), polls)
			return
		}
		if time.Now().After(deadline) {
			t.Logf("the transcript still lacks %d of the messages live sent after %v", missing, time.Since(begin))
			return
		}
		time.Sleep(20 * time.Millisecond) // polling the file, with a deadline
	}
}

// transcriptLacks counts the envelopes of live, turn markers aside, whose
// ids the replay of the transcript at path does not have (all of them when
// it cannot be read yet).
func transcriptLacks(path string, live []protocol.Envelope) int {
	have := map[string]bool{}
	if s, err := replay.FindSession([]string{path}); err == nil {
		replay.Run(context.Background(), s, replay.Options{}, func(e *protocol.Envelope) error {
			have[e.ID] = true
			return nil
		})
	}
	n := 0
	for _, e := range withoutTurnMarkers(live) {
		if !have[e.ID] {
			n++
		}
	}
	return n
}

func withoutTurnMarkers(envs []protocol.Envelope) []protocol.Envelope {
	var out []protocol.Envelope
	for _, e := range envs {
		if e.Ev.T != protocol.KindTurnStart && e.Ev.T != protocol.KindTurnEnd {
			out = append(out, e)
		}
	}
	return out
}

func TestRealClaudeRemoteTwoTurns(t *testing.T) {
	rig, e := realRemote(t,
		fakeapi.Rule{LastUserContains: "first", Reply: []fakeapi.Block{fakeapi.Thinking("Hm."), fakeapi.Text("one")}},
		fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("two")}})
	rig.prompt("first question")
	rig.until("first turn", has("TE(completed)", 1))
	rig.prompt("second question")
	rig.until("second turn", has("TE(completed)", 2))
	if rig.ev.liveText() == "" {
		t.Fatal("no live token deltas")
	}
	sameAsReplay(t, rig, e, false)
}

func TestRealClaudeRemotePermissions(t *testing.T) {
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	rig, e := realRemote(t,
		fakeapi.Rule{LastUserContains: "make the file", AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Text("Making it."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch made.txt", "description": "Make the file"})}},
		fakeapi.Rule{LastUserContains: "delete", AfterToolResult: no, Reply: []fakeapi.Block{
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch denied.txt", "description": "Make another file"})}},
		fakeapi.Rule{AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("Done.")}})
	answer := func(allow bool) {
		st := rig.untilState("a permission request", func(s SessionState) bool { return len(s.Permissions) == 1 })
		p := st.Permissions[0]
		if p.Tool != "Bash" || !strings.Contains(string(p.Input), "touch") || p.Call == "" {
			t.Fatalf("request %+v", p)
		}
		if err := rig.r.Answer(p.ID, allow, nil, false, "not that one"); err != nil {
			t.Fatal(err)
		}
	}
	rig.prompt("make the file")
	answer(true)
	rig.until("first turn", has("TE(completed)", 1))
	rig.prompt("delete nothing, make another")
	answer(false)
	d := rig.until("second turn", has("TE(completed)", 2))
	if _, err := os.Stat(filepath.Join(e.Project, "made.txt")); err != nil {
		t.Fatalf("allowed command did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.Project, "denied.txt")); err == nil {
		t.Fatal("denied command ran")
	}
	if count(d, `TCE(toolu_fake0002 error "not that one`) != 1 {
		t.Fatalf("denial not shown: %q", d)
	}
	sameAsReplay(t, rig, e, false)
}

// streamingWord is the first word of heldReply's text, which no other
// reply of these tests has.
const streamingWord = "Streaming"

// heldReply is rule answering a text that streams word by word and holds
// after its first word, streamingWord, until release is called (at the
// test's end at the latest): Claude streams for as long as the test needs,
// however loaded the machine, where a reply of a fixed length could end
// before the test acted on it.
func heldReply(t *testing.T, rule fakeapi.Rule) (held fakeapi.Rule, release func()) {
	hold := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	rule.Reply = []fakeapi.Block{fakeapi.Text(streamingWord + " one two three four five six seven eight nine ten")}
	rule.ChunkDelay = 20 * time.Millisecond
	rule.Hold, rule.HoldMidStream = hold, true
	return rule, release
}

func TestRealClaudeRemoteInterrupt(t *testing.T) {
	slow, _ := heldReply(t, fakeapi.Rule{})
	rig, e := realRemote(t, slow)
	rig.prompt("talk slowly")
	interruptWhileStreaming(t, rig, streamingWord)
	d := describeAll(rig.out.Envelopes())
	if count(d, "S(Interrupted by user)") != 1 || d[len(d)-1] != "TE(cancelled)" {
		t.Fatalf("interrupt: %q", d)
	}
	sameAsReplay(t, rig, e, false)
}

// A background subagent: its work arrives after the turn's result (so in
// remote mode it opens a turn of its own, while the -p transcript has no
// turn boundary to show that): every other envelope is the same, with the
// same ids, including the prompt stream-json leaves out (D4, D17).
// backgroundHelper is a fake API where the main agent launches a
// background subagent ("Count files") that lists files and reports, and
// then answers the task notification with notified.
func backgroundHelper(notified fakeapi.Rule) []fakeapi.Rule {
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	notified.Agent, notified.LastUserContains = "main", "<task-notification>"
	return []fakeapi.Rule{notified,
		{Agent: "main", AfterToolResult: no, Times: 1, Reply: []fakeapi.Block{fakeapi.ToolUse("Agent", map[string]any{
			"description": "Count files", "prompt": "SUBAGENT_TASK: count the files here", "subagent_type": "general-purpose"})}},
		{Agent: "main", AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("Launched.")}},
		// The subagent works after "Launched.", so live and replay agree
		// on order.
		{Agent: "subagent", AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Text("Sub: listing."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "ls", "description": "List files"})}},
		{Agent: "subagent", AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("Subagent: two files.")}}}
}

func TestRealClaudeRemoteSubagent(t *testing.T) {
	rig, e := realRemote(t, backgroundHelper(fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("The helper is done.")}})...)
	rig.prompt("spawn a helper")
	d := rig.until("the follow-up turn", func(d []string) bool {
		return count(d, "A(The helper is done.)") == 1 && strings.HasPrefix(d[len(d)-1], "TE(")
	})
	sub := protocol.SubagentID("toolu_fake0001")
	for _, w := range []string{"start[" + sub + "](Count files)", "A[" + sub + "](SUBAGENT_TASK", "TCS(toolu_fake0002 Bash)", "stop[" + sub + "]", "S(Agent “Count files” completed)"} {
		if count(d, w) != 1 {
			t.Fatalf("missing %s in %q", w, d)
		}
	}
	sameAsReplay(t, rig, e, true)
}

// Prompts sent while a turn runs: each is done only when Claude took it
// (its echo, when its turn starts), not when it was written, and the turns
// run in the order sent. An interrupt stops the running turn only: the
// prompts queued behind it still run (Claude's still_queued).
func TestRealClaudeRemoteQueuedPrompts(t *testing.T) {
	for _, interrupt := range []bool{false, true} {
		t.Run(map[bool]string{false: "in turn", true: "interrupted"}[interrupt], func(t *testing.T) {
			slow, release := heldReply(t, fakeapi.Rule{LastUserContains: "talk slowly"})
			rig, e := realRemote(t, slow,
				fakeapi.Rule{LastUserContains: "second", Reply: []fakeapi.Block{fakeapi.Text("reply to second")}},
				fakeapi.Rule{LastUserContains: "third", Reply: []fakeapi.Block{fakeapi.Text("reply to third")}})
			rig.prompt("talk slowly")
			taken := make(chan string, 2)
			for _, text := range []string{"second", "third"} {
				wait, err := rig.r.SendPrompt(text)
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					if err := wait(ctx); err != nil {
						taken <- text + ": " + err.Error()
						return
					}
					taken <- text
				}()
			}
			untilLiveText(t, rig, streamingWord)
			// The first turn still streams (its reply held): neither
			// queued prompt is taken.
			select {
			case s := <-taken:
				t.Fatalf("prompt %q done while the turn before it ran", s)
			default:
			}
			if interrupt {
				if err := rig.r.Interrupt(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				release()
			}
			// Claude takes the prompts queued behind a turn together (one
			// user message, a text block each): both are done then.
			var got []string
			for range 2 {
				select {
				case s := <-taken:
					got = append(got, s)
				case <-time.After(60 * time.Second):
					t.Fatalf("prompts taken: %q; envelopes: %q", got, describeAll(rig.out.Envelopes()))
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, []string{"second", "third"}) {
				t.Fatalf("prompts taken: %q", got)
			}
			rig.untilState("idle", func(s SessionState) bool { return s.Status == StatusIdle })
			first := map[bool]string{false: "TE(completed)", true: "TE(cancelled)"}[interrupt]
			d := rig.until("the queued prompts' turn", func(d []string) bool { return len(d) > 0 && d[len(d)-1] == "TE(completed)" && count(d, "TE(") >= 2 })
			var order []string
			for _, s := range d {
				if strings.HasPrefix(s, "TE(") || strings.HasPrefix(s, "U(") {
					order = append(order, strings.TrimSpace(s))
				}
			}
			if want := []string{"U(talk slowly)", first, "U(second\n)", "U(third)", "TE(completed)"}; !slices.Equal(order, want) {
				t.Fatalf("prompts and turn ends %q, want %q", order, want)
			}
			sameAsReplay(t, rig, e, false)
		})
	}
}

// A turn Claude starts by itself (a background subagent's notification
// after the prompt's turn ended) and a queued prompt's turn: the session is
// busy while they run, and Interrupt stops them (the turn ends cancelled).
func TestRealClaudeRemoteBusyAndInterruptOutsidePromptTurns(t *testing.T) {
	t.Run("self-started", func(t *testing.T) {
		slow, _ := heldReply(t, fakeapi.Rule{})
		rig, e := realRemote(t, backgroundHelper(slow)...)
		rig.prompt("spawn a helper")
		interruptWhileStreaming(t, rig, streamingWord)
		sameAsReplay(t, rig, e, true)
	})
	t.Run("queued", func(t *testing.T) {
		slow, _ := heldReply(t, fakeapi.Rule{LastUserContains: "second"})
		rig, e := realRemote(t,
			fakeapi.Rule{LastUserContains: "first", Reply: []fakeapi.Block{fakeapi.Text("alpha beta gamma")}, ChunkDelay: 100 * time.Millisecond},
			slow)
		rig.prompt("first")
		wait, err := rig.r.SendPrompt("second")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := wait(ctx); err != nil {
			t.Fatal(err)
		}
		interruptWhileStreaming(t, rig, streamingWord)
		sameAsReplay(t, rig, e, false)
	})
}

// untilLiveText waits (with a deadline) for word in the live text.
func untilLiveText(t *testing.T, rig *remoteRig, word string) {
	t.Helper()
	for deadline := time.Now().Add(untilLimit); !strings.Contains(rig.ev.liveText(), word); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the live text %q; envelopes: %q", word, rig.ev.liveText(), describeAll(rig.out.Envelopes()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// interruptWhileStreaming waits for word in the live text (of a reply that
// holds, see heldReply), checks that the session is busy, interrupts, and
// waits for the turn to end cancelled.
func interruptWhileStreaming(t *testing.T, rig *remoteRig, word string) {
	t.Helper()
	untilLiveText(t, rig, word)
	if st := rig.r.State(); st.Status != StatusBusy {
		t.Fatalf("status %q while Claude streams", st.Status)
	}
	if err := rig.r.Interrupt(context.Background()); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	d := rig.until("the cancelled turn", func(d []string) bool { return len(d) > 0 && d[len(d)-1] == "TE(cancelled)" })
	if count(d, "TE(cancelled)") != 1 {
		t.Fatalf("envelopes %q", d)
	}
}

// stop_task against the real Claude Code: a background subagent that is
// still working is stopped alone; Claude confirms, and the subagent is no
// longer running.
func TestRealClaudeRemoteStopTask(t *testing.T) {
	rules := backgroundHelper(fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("The helper is done.")}})
	working := make(chan struct{})
	t.Cleanup(func() { close(working) })
	for i := range rules {
		if rules[i].Agent == "subagent" {
			rules[i].Hold = working // still working when stopped, however long that takes
		}
	}
	rig, e := realRemote(t, rules...)
	rig.prompt("spawn a helper")
	rig.until("the launch", func(d []string) bool { return count(d, "A(Launched.)") == 1 })
	sub := protocol.SubagentID("toolu_fake0001")
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := rig.r.StopTask(context.Background(), sub)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNoTask) || time.Now().After(deadline) {
			t.Fatalf("stop: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the task is followed once Claude says it started
	}
	for {
		if errors.Is(rig.r.StopTask(context.Background(), sub), ErrNoTask) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stopped subagent still runs")
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := rig.until("the subagent's end", func(d []string) bool { return count(d, "S(Agent “Count files” stopped)") == 1 })
	if count(d, "stop["+sub+"]") != 1 || count(d, "TE(cancelled)") != 0 || count(d, "A(Launched.)") != 1 {
		t.Fatalf("envelopes %q", d)
	}
	// Claude 2.1.330 prints the stopped subagent's "[Request interrupted by
	// user]" on stdout after the task's notification, while its transcript
	// has it before: the notification waits for that line.
	sameAsReplay(t, rig, e, true)
}

// stop_task while the background subagent runs a tool, after the turn that
// launched it ended: Claude 2.1.330 prints the task's notification, then the
// subagent's tool result and its interruption line. The subagent starts
// once and stops once, as in the transcript's replay.
func TestRealClaudeRemoteStopTaskMidTool(t *testing.T) {
	rules := backgroundHelper(fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("The helper is done.")}})
	for i := range rules {
		if rules[i].Agent == "subagent" && rules[i].AfterToolResult != nil && !*rules[i].AfterToolResult {
			rules[i].Reply = []fakeapi.Block{fakeapi.Text("Sub: waiting."), fakeapi.ToolUse("Bash", map[string]any{"command": "sleep 20", "description": "Wait"})}
		}
	}
	rig, e := realRemote(t, rules...)
	rig.prompt("spawn a helper")
	rig.until("the launch and the subagent's tool", func(d []string) bool {
		return count(d, "TE(completed)") == 1 && count(d, "TCS(toolu_fake0002 Bash)") == 1
	})
	sub := protocol.SubagentID("toolu_fake0001")
	if err := rig.r.StopTask(context.Background(), sub); err != nil {
		t.Fatalf("stop: %v", err)
	}
	d := rig.until("the follow-up turn", func(d []string) bool {
		return count(d, "A(The helper is done.)") == 1 && d[len(d)-1] == "TE(completed)"
	})
	if count(d, "start["+sub+"]") != 1 || count(d, "stop["+sub+"]") != 1 || count(d, "TCE(toolu_fake0002 error") != 1 {
		t.Fatalf("envelopes %q", d)
	}
	sameAsReplay(t, rig, e, true)
}

// After a turn remote mode asks the real Claude Code how full its context
// is (get_context_usage): the session state says it, used and window, with
// the largest uses named.
func TestRealClaudeRemoteContextUsage(t *testing.T) {
	rig, _ := realRemote(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("hi")}})
	rig.prompt("hello")
	st := rig.untilState("the context usage", func(s SessionState) bool { return s.Context != nil })
	c := st.Context
	if c.MaxTokens <= 0 || c.UsedTokens <= 0 || c.UsedTokens > c.MaxTokens || len(c.Categories) == 0 || len(c.Categories) > MaxContextCategories {
		t.Fatalf("context usage %+v", c)
	}
	t.Logf("context: %d of %d tokens; %+v", c.UsedTokens, c.MaxTokens, c.Categories)
}

func TestParseContextUsage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *ContextUsage
	}{
		{`{"categories":[{"name":"System prompt","tokens":2369,"kind":"used"},{"name":"Free space","tokens":9000,"kind":"free"}],"totalTokens":2369,"maxTokens":200000}`,
			&ContextUsage{UsedTokens: 2369, MaxTokens: 200000, Categories: []ContextCategory{{"System prompt", 2369}}}},
		{`{}`, nil},
		{`{"totalTokens":5,"maxTokens":0}`, nil},
		{`[1]`, nil},
	} {
		got := parseContextUsage(json.RawMessage(tc.in))
		if (got == nil) != (tc.want == nil) || got != nil && (got.UsedTokens != tc.want.UsedTokens || got.MaxTokens != tc.want.MaxTokens || !slices.Equal(got.Categories, tc.want.Categories)) {
			t.Errorf("%s: %+v, want %+v", tc.in, got, tc.want)
		}
	}
	many := `{"totalTokens":1,"maxTokens":2,"categories":[` + strings.Repeat(`{"name":"x","tokens":1,"kind":"used"},`, 20) + `{"name":"y","tokens":1,"kind":"used"}]}`
	if got := parseContextUsage(json.RawMessage(many)); len(got.Categories) != MaxContextCategories {
		t.Errorf("%d categories kept", len(got.Categories))
	}
}
