package claudetest

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/fakeapi"
)

// EnterUntilTaken presses Enter on w, the terminal of an interactive Claude,
// again until Claude asks the model with prompt, at most 5 more times, and
// fails the test with the end of screen() if it never does: on a loaded
// machine Claude Code can lose the Enter that follows the echoed text (the
// prompt left in its input box, no request), while an Enter on an empty
// input box is nothing to it.
func (e *Env) EnterUntilTaken(t testing.TB, w io.Writer, prompt string, screen func() string) {
	t.Helper()
	took := func() bool {
		return slices.ContainsFunc(e.API.Requests(), func(r fakeapi.Request) bool { return strings.Contains(r.LastUser, prompt) })
	}
	for try := 0; ; try++ {
		for deadline := time.Now().Add(10 * time.Second); !took() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
		}
		if took() {
			return
		}
		if try == 5 {
			s := screen()
			if len(s) > 3000 {
				s = s[len(s)-3000:]
			}
			t.Fatalf("Claude never took the prompt %q; screen:\n%q", prompt, s)
		}
		t.Logf("Claude has not taken the prompt %q: Enter again", prompt)
		w.Write([]byte("\r"))
	}
}
