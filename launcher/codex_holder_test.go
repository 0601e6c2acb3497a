package launcher

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
)

// Another Codex run in the same folder while ccrelay codex runs writes
// rollouts of the same folder and kind: they are not this run's. Two
// rollouts appear, this run's and another's, in either order; a process of
// this run's tree holding a rollout makes it this run's, only other
// processes holding it makes it another's, and where no process holds it
// or the system does not say, only the first thread found is this run's
// (never a switch to another Codex's thread).
func TestCodexWatchAnotherCodex(t *testing.T) {
	const ours, theirs = "01a21daf-e89b-7892-97c7-2fee8a1b0011", "01a21daf-e89b-7892-97c7-2fee8a1b0012"
	for _, tc := range []struct {
		name          string
		first, second string                   // the threads in the order their rollouts appear
		held          map[string]rolloutHolder // by thread (holderUnknown if absent)
		want          string                   // the threads reported
		early         string                   // a thread whose session_meta says it began before the run
	}{
		{"ours then theirs, held", ours, theirs, map[string]rolloutHolder{ours: holderOurs, theirs: holderOther}, "[" + ours + "]", ""},
		{"theirs then ours, held", theirs, ours, map[string]rolloutHolder{ours: holderOurs, theirs: holderOther}, "[" + ours + "]", ""},
		{"ours then theirs, not known", ours, theirs, nil, "[" + ours + "]", ""},
		{"ours then theirs, ours ended", ours, theirs, map[string]rolloutHolder{ours: holderNone, theirs: holderNone}, "[" + ours + "]", ""},
		{"theirs held then ours ended", theirs, ours, map[string]rolloutHolder{ours: holderNone, theirs: holderOther}, "[" + ours + "]", ""},
		{"two threads of this run (/new)", ours, theirs, map[string]rolloutHolder{ours: holderOurs, theirs: holderOurs}, "[" + ours + " " + theirs + "]", ""},
		// Codex's shared app server holds both (the holder does not say):
		// a thread another TUI opened before this run, whose rollout
		// appears at its first prompt after the run started, is not this
		// run's, though found first.
		{"theirs begun before the run then ours, shared server", theirs, ours, nil, "[" + ours + "]", theirs},
		{"theirs begun before the run then ours, none hold", theirs, ours, map[string]rolloutHolder{ours: holderNone, theirs: holderNone}, "[" + ours + "]", theirs},
		{"ours then theirs begun before the run, shared server", ours, theirs, nil, "[" + ours + "]", theirs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, cwd := t.TempDir(), t.TempDir()
			var got []string
			w := newCodexWatch(home, cwd, nil, func(p string, m *codex.SessionMeta) { got = append(got, m.ID) },
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			w.holderOf = func(p string, root int) rolloutHolder {
				if root != 4242 {
					t.Errorf("asked with root %d, want the process started", root)
				}
				id, _ := codex.ThreadID(p)
				return tc.held[id]
			}
			w.snapshot()
			w.started(4242)
			began := func(thread string) time.Time {
				if thread == tc.early {
					return time.Now().Add(-time.Hour)
				}
				return time.Now()
			}
			rolloutBegun(t, home, filepath.Join("2026", "11", "27"), tc.first, cwd, began(tc.first))
			w.scan()
			rolloutBegun(t, home, filepath.Join("2026", "11", "28"), tc.second, cwd, began(tc.second))
			w.scan()
			w.scan()
			if fmt.Sprint(got) != tc.want {
				t.Fatalf("reported %v, want %s", got, tc.want)
			}
		})
	}
}

// rolloutBegun writes a TUI thread's rollout in cwd whose session_meta says
// the thread began at began.
func rolloutBegun(t *testing.T, home, day, thread, cwd string, began time.Time) {
	t.Helper()
	dir := filepath.Join(codex.SessionsDir(home), day)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	at := began.UTC().Format("2006-01-02T15:04:05.000Z")
	meta := fmt.Sprintf(`{"timestamp":%q,"ordinal":0,"type":"session_meta","payload":{"id":%q,"timestamp":%q,"cwd":%q,"originator":%q,"source":"vscode","cli_version":"0.169.0"}}`+"\n",
		at, thread, at, cwd, CodexOriginatorTUI)
	if err := os.WriteFile(filepath.Join(dir, "rollout-2026-11-27T15-46-37-"+thread+".jsonl"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
}
