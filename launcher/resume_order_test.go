package launcher

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// lateFirstPass is the sink of a scanner whose first pass is slow (a long
// transcript, a loaded machine): its first delivery waits until remote
// mode has the session, or until the loop says that it waits for the
// pass. Deliver is called by the scanner's goroutine only.
type lateFirstPass struct {
	pipe    *Pipeline
	session string
	said    <-chan struct{} // closed when the loop wrote a notice
	passed  bool
}

func (l *lateFirstPass) Deliver(ctx context.Context, b scanner.Batch) error {
	if !l.passed {
		l.passed = true
		deadline := time.Now().Add(30 * time.Second)
		for !l.remote() && time.Now().Before(deadline) {
			select {
			case <-l.said:
				return l.pipe.Deliver(ctx, b)
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	return l.pipe.Deliver(ctx, b)
}

func (l *lateFirstPass) remote() bool {
	l.pipe.mu.Lock()
	defer l.pipe.mu.Unlock()
	return l.pipe.remote[l.session]
}

// noticeSaid closes said at the first notice the loop writes.
type noticeSaid struct {
	once sync.Once
	said chan struct{}
}

func (n *noticeSaid) Write(b []byte) (int, error) {
	n.once.Do(func() { close(n.said) })
	return len(b), nil
}

// A session resumed in remote mode (the daemon restarted it, or ccrelay
// --remote --resume) after ccrelay and its Claude were killed while a Bash
// call ran: its mapper is rebuilt from the transcript before remote mode
// maps what the resumed Claude prints, however slow the scanner's first
// pass is. The phone then gets what replay of the transcript has (ids,
// order, statuses and texts): the next prompt cuts the turn left open, its
// call ends once, one turn is open at a time. With the rebuild late, remote
// mode's records went through a mapper that knew nothing of the session:
// no cut at all (two open turns, the call running for ever), or, with the
// open turn kept in turns.json, the cut of a turn ccrelay did not see end
// where replay has Claude's.
func TestRemoteResumeRebuildsBeforeMapping(t *testing.T) {
	for _, kept := range []bool{false, true} {
		t.Run(fmt.Sprintf("kept turn %v", kept), func(t *testing.T) { resumeRebuildsFirst(t, kept) })
	}
}

func resumeRebuildsFirst(t *testing.T, kept bool) {
	old := catchUpNotice
	catchUpNotice = 20 * time.Millisecond
	t.Cleanup(func() { catchUpNotice = old })

	home, project := t.TempDir(), t.TempDir()
	state := t.TempDir()
	cursor, turns := filepath.Join(state, "cursor.json"), filepath.Join(state, "turns.json")
	const sess = "5e55a0a0-1111-4222-8333-444444444444"
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), project)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(projectDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// What the first ccrelay's Claude wrote before both were killed: a
	// prompt, a text and a Bash call without a result.
	path := claude.TranscriptPath(projectDir, sess)
	t0 := time.Now().Add(-time.Minute).UTC()
	at := func(i int) string { return t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano) }
	lines := []string{
		`{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"` + sess + `","timestamp":"` + at(0) + `","message":{"role":"user","content":"run it"}}`,
		`{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"` + sess + `","timestamp":"` + at(1) + `","message":{"id":"msg_1","role":"assistant","model":"fake-model","content":[{"type":"text","text":"Running."}]}}`,
		`{"type":"assistant","uuid":"u3","parentUuid":"u2","sessionId":"` + sess + `","timestamp":"` + at(2) + `","message":{"id":"msg_1","role":"assistant","model":"fake-model","content":[{"type":"tool_use","id":"toolu_open","name":"Bash","input":{"command":"sleep 100"}}]}}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The first ccrelay sent all of it and saved its cursor past it (and,
	// kept, its open turn).
	out := &lockedOutbox{}
	pipe1 := NewPipeline("", out)
	if kept {
		if err := pipe1.KeepTurns(turns, log); err != nil {
			t.Fatal(err)
		}
	}
	runScanner(t, projectDir, cursor, pipe1, sess, log)
	if d := describeAll(out.of(sess)); !has("TCS(toolu_open", 1)(d) {
		t.Fatalf("the first run sent %q", d)
	}

	// The next ccrelay resumes the session in remote mode; its scanner's
	// first pass is slow.
	pipe2 := NewPipeline("", out)
	if kept {
		if err := pipe2.KeepTurns(turns, log); err != nil {
			t.Fatal(err)
		}
	}
	notice := &noticeSaid{said: make(chan struct{})}
	sink := &lateFirstPass{pipe: pipe2, session: sess, said: notice.said}
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, CursorFile: cursor, PollInterval: 20 * time.Millisecond, Logger: log}, sink)
	if err != nil {
		t.Fatal(err)
	}
	scanCtx, stopScan := context.WithCancel(context.Background())
	scanDone := make(chan error, 1)
	go func() { scanDone <- sc.Run(scanCtx) }()
	defer func() { stopScan(); <-scanDone }()

	stream := filepath.Join(t.TempDir(), "stream.json")
	writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "Back."})}})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + stream}
	cmds := make(chan Command)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:  LocalOptions{Claude: fakeClaude, Dir: project, Env: env, Logger: log},
		Remote: RemoteOptions{StopTimeout: time.Second}, StartRemote: true, Session: sess, Resume: true,
		Pipeline: pipe2, Scanner: sc, Commands: cmds, Events: &events{}, Logger: log, Notice: notice,
	})
	select {
	case err := <-sendPrompt(cmds, "c1", "again"):
		if err != nil {
			t.Fatalf("prompt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("prompt not done")
	}
	untilSession(t, out, sess, "the answer", has("A(Back.)", 1))
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}

	// The phone's copy (the relay keeps an id once) against replay.
	var live []protocol.Envelope
	ids := map[string]bool{}
	for _, e := range out.of(sess) {
		if !ids[e.ID] {
			ids[e.ID] = true
			live = append(live, e)
		}
	}
	envtest.CheckInvariants(t, live)
	want := replayFiles(t, path)
	if n := len(want); n > 0 && len(live) == n+1 && live[n].Ev.T == protocol.KindTurnEnd && want[n-1].Ev.T != protocol.KindTurnEnd {
		live = live[:n] // a -p transcript does not say that its last turn ended
	}
	ld, wd := describeAll(live), describeAll(want)
	same := len(live) == len(want)
	for i := 0; same && i < len(live); i++ {
		same = live[i].ID == want[i].ID && ld[i] == wd[i]
	}
	if !same {
		t.Fatalf("the phone differs from replay\nphone:  %q\nreplay: %q", ld, wd)
	}
	if n := count(ld, "TCE(toolu_open"); n != 1 {
		t.Fatalf("the call ended %d times: %q", n, ld)
	}
}

// runScanner makes one pass of a scanner over the project's transcripts
// into sink, saving its cursor, as a ccrelay that ran before did.
func runScanner(t *testing.T, projectDir, cursor string, sink scanner.Sink, session string, log *slog.Logger) {
	t.Helper()
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, CursorFile: cursor, PollInterval: 20 * time.Millisecond, Logger: log}, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	sc.AddSession(session)
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	err = sc.Flush(fctx)
	cancel()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The app takes a session over from the terminal while the scanner has
// not delivered the last records the terminal's Claude wrote (a slow
// pass): the turn closes as those records have it, however slow the pass
// is. Here Claude had the call's result and its answer: the turn ends
// completed, the call with its result, as replay has it. Cut at 5 s
// before, the turn ended failed with the call cut, and those records,
// which the resumed Claude never prints, were passed over by remote
// mode's hold.
func TestSwitchWaitsForTheTerminalsRecords(t *testing.T) {
	old := catchUpNotice
	catchUpNotice = 20 * time.Millisecond
	t.Cleanup(func() { catchUpNotice = old })

	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	stream := filepath.Join(t.TempDir(), "stream.json")
	const sess = "5e55a0a0-2222-4333-8444-555555555555"
	t0 := time.Now().Add(-time.Minute).UTC()
	at := func(i int) string { return t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano) }
	writeJSON(t, local, map[string]any{"lines": []string{
		`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"` + at(0) + `","message":{"role":"user","content":"run it"}}`,
		`{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"{{session}}","timestamp":"` + at(1) + `","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_sw","name":"Bash","input":{"command":"make"}}]}}`,
		`{"type":"user","uuid":"u2","parentUuid":"a1","sessionId":"{{session}}","timestamp":"` + at(2) + `","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_sw","content":"built"}]}}`,
		`{"type":"assistant","uuid":"a2","parentUuid":"u2","sessionId":"{{session}}","timestamp":"` + at(3) + `","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"Built."}]}}`,
	}, "intervalMs": 5, "hang": true})
	writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "Back."})}})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local, "FAKE_CLAUDE_STREAM=" + stream}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), project)
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedOutbox{}
	pipe := NewPipeline("", out)
	notice := &noticeSaid{said: make(chan struct{})}
	sink := &heldRecords{pipe: pipe, session: sess, uuid: "u2", said: notice.said}
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, PollInterval: 20 * time.Millisecond, Logger: log}, sink)
	if err != nil {
		t.Fatal(err)
	}
	scanCtx, stopScan := context.WithCancel(context.Background())
	scanDone := make(chan error, 1)
	go func() { scanDone <- sc.Run(scanCtx) }()
	defer func() { stopScan(); <-scanDone }()

	cmds := make(chan Command)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: pipe, Scanner: sc, Commands: cmds, Events: ev, Logger: log, Notice: notice,
	})
	path := claude.TranscriptPath(projectDir, sess)
	waitFor(t, "the terminal's Claude wrote its answer", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "Built.") && ev.last().Mode == "local"
	})
	select {
	case err := <-sendPrompt(cmds, "c1", "again"):
		if err != nil {
			t.Fatalf("prompt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("prompt not done")
	}
	untilSession(t, out, sess, "the answer", has("A(Back.)", 1))
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	live := out.of(sess)
	envtest.CheckInvariants(t, live)
	want := replayFiles(t, path)
	if n := len(want); n > 0 && len(live) == n+1 && live[n].Ev.T == protocol.KindTurnEnd && want[n-1].Ev.T != protocol.KindTurnEnd {
		live = live[:n]
	}
	ld, wd := describeAll(live), describeAll(want)
	same := len(live) == len(want)
	for i := 0; same && i < len(live); i++ {
		same = live[i].ID == want[i].ID && ld[i] == wd[i]
	}
	if !same {
		t.Fatalf("the phone differs from replay\nphone:  %q\nreplay: %q", ld, wd)
	}
}

// heldRecords is the sink of a scanner slow to deliver a batch holding the
// record uuid: it waits until remote mode has the session, or until the
// loop says that it waits. Deliver is called by the scanner's goroutine
// only.
type heldRecords struct {
	pipe          *Pipeline
	session, uuid string
	said          <-chan struct{}
	passed        bool
}

func (h *heldRecords) Deliver(ctx context.Context, b scanner.Batch) error {
	holds := false
	for _, r := range b.Records {
		holds = holds || r.Record.UUID == h.uuid
	}
	if holds && !h.passed {
		h.passed = true
		late := &lateFirstPass{pipe: h.pipe, session: h.session, said: h.said}
		return late.Deliver(ctx, b)
	}
	return h.pipe.Deliver(ctx, b)
}
