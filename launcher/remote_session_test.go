package launcher

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/protocol"
)

// promptErr sends a prompt and returns what became of it.
func (rig *remoteRig) promptErr(text string) error {
	rig.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return rig.r.Prompt(ctx, text)
}

// Claude killed right after its init, before its transcript exists: Claude
// has no session to resume (it refuses --resume with "No conversation
// found"), so the next start creates it again under the same id and the
// next prompts are answered. Without looking at the transcript every later
// start was --resume, refused: the session was dead for good.
func TestRemoteKilledBeforeTranscript(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		map[string]any{"initExit": 137},
		steps(map[string]any{"text": "answer two"}),
		steps(map[string]any{"text": "answer three"}),
	}}, RemoteOptions{})
	if err := rig.promptErr("one"); err == nil || !strings.Contains(err.Error(), "stopped before taking the prompt") {
		t.Fatalf("the prompt Claude never took: %v", err)
	}
	path := claude.TranscriptPath(rig.r.opts.ProjectDir, rig.r.ID())
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the transcript exists after a kill before any record: %v", err)
	}
	if err := rig.promptErr("two"); err != nil {
		t.Fatalf("the next prompt: %v", err)
	}
	rig.until("the answer", has("A(answer two)", 1))
	if err := rig.promptErr("three"); err != nil {
		t.Fatalf("the prompt after: %v", err)
	}
	d := rig.until("the third answer", has("A(answer three)", 1))
	wantInOrder(t, d, "U(two)", "A(answer two)", "TE(completed)", "U(three)", "A(answer three)")
	argv := rig.argv()
	var starts []string
	for _, a := range argv {
		for _, x := range a {
			if strings.HasPrefix(x, "--resume=") || strings.HasPrefix(x, "--session-id=") {
				starts = append(starts, strings.Split(x, "=")[0])
			}
		}
	}
	// The second Claude starts the session anew: there is no transcript.
	envtest.Eq(t, starts, "--session-id", "--session-id")
	rig.checkTurns()
}

// A transcript that holds no message (Claude stopped between its first
// bookkeeping lines and the prompt) is refused by --resume and by
// --session-id alike: it is set aside and the session starts anew under
// its id.
func TestRemoteTranscriptWithoutMessage(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{steps(map[string]any{"text": "fresh"})}}, RemoteOptions{Resume: true})
	path := claude.TranscriptPath(rig.r.opts.ProjectDir, rig.r.ID())
	if err := os.MkdirAll(rig.r.opts.ProjectDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bookkeeping := `{"type":"queue-operation","operation":"enqueue","timestamp":"2026-01-01T00:00:00Z","sessionId":"` + rig.r.ID() + `"}` + "\n"
	if err := os.WriteFile(path, []byte(bookkeeping), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rig.promptErr("hello"); err != nil {
		t.Fatalf("prompt: %v", err)
	}
	rig.until("the answer", has("A(fresh)", 1))
	if b, err := os.ReadFile(path + ".unused"); err != nil || string(b) != bookkeeping {
		t.Fatalf("the transcript set aside: %q, %v", b, err)
	}
	if argv := rig.argv(); len(argv) != 1 || !slices.Contains(argv[0], "--session-id="+rig.r.ID()) {
		t.Fatalf("argv %q", argv)
	}
}

func TestReadTranscriptState(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          transcriptState
	}{
		{"missing", "", transcriptMissing},
		{"empty", "\n", transcriptNoMessage},
		{"bookkeeping", `{"type":"queue-operation","operation":"enqueue"}` + "\n" + `{"type":"atis-latch"}` + "\n", transcriptNoMessage},
		{"cut message", `{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}`, transcriptNoMessage},
		{"prompt", `{"type":"queue-operation"}` + "\n" + `{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}` + "\n", transcriptMessages},
		{"garbage", "not json\n{\n", transcriptNoMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dir + "/" + tc.name + ".jsonl"
			if tc.name != "missing" {
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readTranscriptState(path)
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// liveOnlyCrash checks that every envelope of replay is live, with its id,
// in order, and that live has besides them only turn markers and what a
// crash shows (the note, the end of a call Claude left).
func liveOnlyCrash(t *testing.T, live, want []protocol.Envelope) {
	t.Helper()
	live, want = withoutTurnMarkers(live), withoutTurnMarkers(want)
	ld, wd := envtest.DescribeAll(live), envtest.DescribeAll(want)
	j := 0
	for i := range live {
		if j < len(want) && live[i].ID == want[j].ID && ld[i] == wd[j] {
			j++
			continue
		}
		if !strings.Contains(ld[i], "Claude Code exited while this tool ran") && !strings.HasPrefix(ld[i], "SVC(Claude Code stopped unexpectedly") {
			t.Fatalf("live %d %s is not in replay\nlive:   %q\nreplay: %q", i, ld[i], ld, wd)
		}
	}
	if j != len(want) {
		t.Fatalf("replay's %s is not live\nlive:   %q\nreplay: %q", wd[j], ld, wd)
	}
}
