package launcher

import (
	"fmt"
	"strings"
	"testing"
)

// TestCodexDeclinedNotesBounded: a Codex that floods requests ccrelay
// does not know has each declined, but the app is told of the first
// MaxDeclinedNotes of a turn one by one and of the rest in one note at the
// turn's end.
func TestCodexDeclinedNotesBounded(t *testing.T) {
	const n = 40
	var steps []fakeStep
	for i := range n {
		steps = append(steps, fakeStep{Request: fmt.Sprintf("item/flood%d/requestApproval", i), Params: params(map[string]any{"threadId": fakeThreadID})})
	}
	f := startFakeCodex(t, fakeScript{Steps: steps})
	f.prompt(t, "go")
	for i := range n {
		if got := f.waitAnswer(t, fmt.Sprint(101+i)); !strings.Contains(got, "ccrelay declined it") {
			t.Fatalf("request %d answered %s", i, got)
		}
	}
	f.rec.waitFor(t, "the turn's end", func() bool {
		st := f.rec.last()
		return st.Status == StatusIdle && len(f.rec.notes) > 0 && strings.Contains(f.rec.notes[len(f.rec.notes)-1], "more")
	})
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	want := fmt.Sprintf("Codex sent %d more requests that ccrelay declined", n-MaxDeclinedNotes)
	if len(f.rec.notes) != MaxDeclinedNotes+1 || !strings.Contains(f.rec.notes[MaxDeclinedNotes], want) ||
		!strings.Contains(f.rec.notes[0], "item/flood0/requestApproval") {
		t.Fatalf("%d notes, want %d and then %q: %q", len(f.rec.notes), MaxDeclinedNotes+1, want, f.rec.notes)
	}
}

// The count of the requests declined past MaxDeclinedNotes is told when
// the session stops, or app-server ends, before the turn does: it was kept
// for the turn's end, which never came, and lost.
func TestCodexDeclinedNotesFlushedOnStop(t *testing.T) {
	const n = MaxDeclinedNotes + 4
	for _, tc := range []struct {
		name  string
		crash bool // app-server ends, rather than the session stopping
	}{
		{"the session stops", false},
		{"app-server ends", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []fakeStep
			for i := range n {
				steps = append(steps, fakeStep{Request: fmt.Sprintf("item/flood%d/requestApproval", i), Params: params(map[string]any{"threadId": fakeThreadID})})
			}
			if tc.crash {
				steps = append(steps, fakeStep{Exit: true})
			}
			f := startFakeCodex(t, fakeScript{Steps: steps, Hang: true})
			f.prompt(t, "go")
			for i := range n {
				if got := f.waitAnswer(t, fmt.Sprint(101+i)); !strings.Contains(got, "ccrelay declined it") {
					t.Fatalf("request %d answered %s", i, got)
				}
			}
			if !tc.crash {
				f.r.Stop()
			}
			want := fmt.Sprintf("Codex sent %d more requests that ccrelay declined", n-MaxDeclinedNotes)
			f.rec.waitFor(t, "the count of the requests declined", func() bool {
				return len(f.rec.notes) == MaxDeclinedNotes+1 && strings.Contains(f.rec.notes[MaxDeclinedNotes], want)
			})
		})
	}
}
