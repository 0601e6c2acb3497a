package launcher

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// deadOutbox stores into out until ccrelay "dies": from then on nothing
// more is stored, as nothing of a killed process is.
type deadOutbox struct {
	mu   sync.Mutex
	dead bool
	out  *MemOutbox
}

func (d *deadOutbox) Append(ctx context.Context, s string, envs []protocol.Envelope) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return errors.New("ccrelay is gone")
	}
	return d.out.Append(ctx, s, envs)
}

func (d *deadOutbox) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
}

// The real Claude Code: ccrelay is killed (and its Claude with it) while a
// Bash call runs. The next ccrelay rebuilds the session from the
// transcript, ends the turn the first left open (the call ends once, the
// turn fails), and continues the session: the resumed Claude's repair of
// the call (recorded, not printed) adds nothing; one open turn at a time.
// When the transcript has the turn, the ids, order and statuses are
// replay's; when Claude died before it wrote the turn (its transcript cut
// back to the prompt here), the turn the app saw is the one that ends,
// and no second turn opens beside it.
func TestRealClaudeRemoteRestartMidTool(t *testing.T) {
	t.Run("written", func(t *testing.T) { restartMidTool(t, false) })
	t.Run("not written", func(t *testing.T) { restartMidTool(t, true) })
}

func restartMidTool(t *testing.T, unwritten bool) {
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	e := claudetest.New(t,
		fakeapi.Rule{LastUserContains: "run it", AfterToolResult: no, Reply: []fakeapi.Block{fakeapi.Text("Running."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "timeout 20 tail -f /dev/null", "description": "Wait"})}},
		fakeapi.Rule{AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("After the tool.")}},
		fakeapi.Rule{LastUserContains: "again", Reply: []fakeapi.Block{fakeapi.Text("Back.")}})
	e.Extra = append(e.Extra, "IS_SANDBOX=1")
	turns := t.TempDir() + "/turns.json"
	out := &MemOutbox{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	session := claude.NewSessionID()
	opts := RemoteOptions{Claude: e.Claude, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second, Logger: log,
		PermissionMode: "bypassPermissions"}

	// The first ccrelay.
	first := &deadOutbox{out: out}
	pipe1 := NewPipeline("", first)
	if err := pipe1.KeepTurns(turns, log); err != nil {
		t.Fatal(err)
	}
	pipe1.SetRemote(session, true)
	rig1 := &remoteRig{t: t, out: out, ev: &events{}}
	rig1.r = NewRemote(session, opts, pipe1, rig1.ev)
	t.Cleanup(func() { rig1.r.Stop(protocol.StatusCancelled) })
	rig1.prompt("run it")
	rig1.until("the tool call", has("TCS(toolu_fake0001", 1))
	path := claude.TranscriptPath(e.ProjectDir(t), session)
	// The call reaches stdout before the transcript: kill Claude only once
	// the transcript holds it, or this is the other case. Not written: the
	// transcript is cut back to the prompt below, and Claude may not have
	// written even that yet (no transcript at all is another case,
	// TestRealClaudeRemoteKilledBeforeTranscript).
	written, what := []byte(`"id":"toolu_fake0001"`), "the call in the transcript"
	if unwritten {
		written, what = []byte(`"text":"run it"`), "the prompt in the transcript"
	}
	waitFor(t, what, func() bool {
		b, _ := os.ReadFile(path)
		return bytes.Contains(b, written)
	})
	first.kill()
	<-killClaude(t, rig1.r).done

	// The next ccrelay: the scanner rebuilds the session from its
	// transcript (what was sent already), then the app's prompt resumes it.
	pipe2 := NewPipeline("", out)
	if err := pipe2.KeepTurns(turns, log); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if unwritten {
		// Up to the prompt: Claude died before it wrote the rest.
		i := bytes.Index(b, []byte(`"text":"run it"`))
		if i < 0 {
			t.Fatalf("no prompt in the transcript:\n%s", b)
		}
		b = b[:i+bytes.IndexByte(b[i:], '\n')+1]
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	batch := scanner.Batch{Session: session}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if r, err := claude.Parse(bytes.Clone(sc.Bytes())); err == nil {
			batch.Records = append(batch.Records, scanner.Record{Record: r, Replayed: true})
		}
	}
	if err := pipe2.Deliver(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	pipe2.SetRemote(session, true)
	opts.Resume = true
	rig2 := &remoteRig{t: t, out: out, ev: &events{}}
	rig2.r = NewRemote(session, opts, pipe2, rig2.ev)
	t.Cleanup(func() { rig2.r.Stop(protocol.StatusCancelled) })
	rig2.prompt("again")
	d := rig2.until("the next turn", has("A(Back.)", 1))
	if n := count(d, "TCE(toolu_fake0001"); n != 1 {
		t.Fatalf("the call ended %d times: %q", n, d)
	}
	// Claude died before writing the call: the restarted ccrelay cuts the
	// turn the app saw. The transcript holds the call: the turn goes on,
	// and the resumed Claude's repair ends the call and the turn, as replay
	// ends them.
	cutEnd, cutNote := `TCE(toolu_fake0001 error "`+StoppedCut.Result, "S("+StoppedCut.Note+")"
	if !unwritten {
		cutEnd, cutNote = `TCE(toolu_fake0001 error "[Tool call interrupted`, "S("+mapper.CutNote+")"
	}
	wantInOrder(t, d, "U(run it)", "TS", "A(Running.)", "TCS(toolu_fake0001 Bash)", cutEnd, cutNote, "TE(failed)", "U(again)", "TS", "A(Back.)")
	if n := count(d, "TS"); n != 2 {
		t.Fatalf("%d turns: %q", n, d)
	}
	if unwritten {
		rig2.r.Stop(protocol.StatusCompleted)
		rig2.checkTurns()
		return
	}
	sameAsReplay(t, rig2, e, false)
}
