package launcher

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// The real Claude Code killed as soon as it printed its init, before it
// wrote its transcript: it has no session to resume ("No conversation
// found with session ID"), so the next Claude creates it again under the
// same id, and the next prompts are answered. Claude writes its transcript
// about 100 ms after init; a kill that came after it is tried again.
func TestRealClaudeRemoteKilledBeforeTranscript(t *testing.T) {
	for attempt := 1; ; attempt++ {
		rig, e := realRemote(t, fakeapi.Rule{LastUserContains: "two", Reply: []fakeapi.Block{fakeapi.Text("answer two")}},
			fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("answer three")}})
		var killed atomic.Bool
		rig.r.onLine = func(p *process, m *claude.StreamMessage) {
			if m.Type == claude.StreamSystem && m.Subtype == claude.SystemInit && killed.CompareAndSwap(false, true) {
				_ = p.tree.kill()
			}
		}
		err := rig.promptErr("one")
		if _, serr := os.Stat(claude.TranscriptPath(e.ProjectDir(t), rig.r.ID())); serr == nil {
			if attempt < 3 {
				t.Logf("attempt %d: Claude wrote its transcript before the kill (prompt: %v); again", attempt, err)
				rig.r.Stop(protocol.StatusCancelled)
				continue
			}
			t.Fatalf("Claude wrote its transcript before the kill in %d attempts", attempt)
		}
		if err == nil || !strings.Contains(err.Error(), "stopped before taking the prompt") {
			t.Fatalf("the prompt Claude never took: %v", err)
		}
		for _, p := range []string{"two", "three"} {
			if err := rig.promptErr(p); err != nil {
				t.Fatalf("prompt %q after the kill: %v", p, err)
			}
			rig.until("the answer to "+p, has("A(answer "+p+")", 1))
		}
		// Besides replay, live has what the crash showed: the note, in
		// the turn Claude's init opened.
		rig.r.Stop(protocol.StatusCompleted)
		liveOnlyCrash(t, rig.checkTurns(), replayFiles(t, claude.TranscriptPath(e.ProjectDir(t), rig.r.ID())))
		return
	}
}
