package launcher

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// The real Claude Code killed as soon as it printed its init, before it
// wrote its transcript: it has no session to resume ("No conversation
// found with session ID"), so the next Claude creates it again under the
// same id; the prompt the killed Claude never took goes to it and is
// answered, once, and so are the next prompts. Claude writes its
// transcript about 100 ms after init; a kill that came after it is tried
// again.
func TestRealClaudeRemoteKilledBeforeTranscript(t *testing.T) {
	for attempt := 1; ; attempt++ {
		rig, e := realRemote(t, fakeapi.Rule{LastUserContains: "one", Reply: []fakeapi.Block{fakeapi.Text("answer one")}},
			fakeapi.Rule{LastUserContains: "two", Reply: []fakeapi.Block{fakeapi.Text("answer two")}},
			fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("answer three")}})
		var killed atomic.Bool
		var late atomic.Bool
		rig.r.onLine = func(p *process, m *claude.StreamMessage) {
			if m.Type == claude.StreamSystem && m.Subtype == claude.SystemInit && killed.CompareAndSwap(false, true) {
				_ = p.tree.kill()
				// Killed: it writes nothing more.
				if _, err := os.Stat(claude.TranscriptPath(e.ProjectDir(t), rig.r.ID())); err == nil {
					late.Store(true)
				}
			}
		}
		err := rig.promptErr("one")
		if late.Load() {
			if attempt < 3 {
				t.Logf("attempt %d: Claude wrote its transcript before the kill (prompt: %v); again", attempt, err)
				rig.r.Stop(protocol.StatusCancelled)
				continue
			}
			t.Fatalf("Claude wrote its transcript before the kill in %d attempts", attempt)
		}
		if err != nil {
			t.Fatalf("the prompt the killed Claude never took: %v", err)
		}
		rig.until("the answer to one", has("A(answer one)", 1))
		for _, p := range []string{"two", "three"} {
			if err := rig.promptErr(p); err != nil {
				t.Fatalf("prompt %q after the kill: %v", p, err)
			}
			rig.until("the answer to "+p, has("A(answer "+p+")", 1))
		}
		// Claude prints before it writes its transcript, and one stopped
		// before it wrote a batch never writes it.
		untilTranscriptHas(t, claude.TranscriptPath(e.ProjectDir(t), rig.r.ID()), func() []protocol.Envelope { return withoutCrashNotes(rig.out.Envelopes()) })
		rig.r.Stop(protocol.StatusCompleted)
		live := rig.checkTurns()
		if n := count(describeAll(live), "U(one)"); n != 1 {
			t.Fatalf("the prompt %d times live: %q", n, describeAll(live))
		}
		if n := len(e.API.Requests()); n != 3 {
			t.Errorf("%d requests to the model, want 3 (one a prompt)", n)
		}
		liveOnlyCrash(t, live, replayFiles(t, claude.TranscriptPath(e.ProjectDir(t), rig.r.ID())))
		return
	}
}

// The real Claude Code killed while it waits for the model: its transcript
// holds the prompt, which it echoes only once the model answers. The
// prompt is done (Claude took it), its text is in the live stream once
// with the transcript's id, and the next prompt continues the session:
// live converges to replay.
func TestRealClaudeRemoteKilledWaitingForModel(t *testing.T) {
	rig, e := realRemote(t, fakeapi.Rule{LastUserContains: "one", Times: 1, Reply: []fakeapi.Block{fakeapi.Text("too late")}, Delay: time.Minute},
		fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("answer two")}})
	wait, err := rig.r.SendPrompt("one")
	if err != nil {
		t.Fatal(err)
	}
	path := claude.TranscriptPath(e.ProjectDir(t), rig.r.ID())
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, _ := readTranscriptState(path); st == transcriptMessages {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Claude never wrote the prompt to its transcript")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(e.API.Requests()); n == 0 {
		// Claude writes the prompt before it calls the model: wait for
		// the call, which the fake API holds.
		for len(e.API.Requests()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	killClaude(t, rig.r)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := wait(ctx); err != nil {
		t.Fatalf("the prompt Claude took: %v", err)
	}
	d := rig.until("the failed turn", has("TE(failed)", 1))
	wantInOrder(t, d, "U(one)", "S(Claude Code stopped unexpectedly: signal: killed)", "TE(failed)")
	if err := rig.promptErr("two"); err != nil {
		t.Fatalf("the next prompt: %v", err)
	}
	rig.until("the answer", has("A(answer two)", 1))
	untilTranscriptHas(t, path, func() []protocol.Envelope { return withoutCrashNotes(rig.out.Envelopes()) })
	rig.r.Stop(protocol.StatusCompleted)
	live := rig.checkTurns()
	if n := count(describeAll(live), "U(one)"); n != 1 {
		t.Fatalf("the prompt %d times live: %q", n, describeAll(live))
	}
	liveOnlyCrash(t, live, replayFiles(t, path))
}
