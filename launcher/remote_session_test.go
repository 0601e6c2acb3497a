package launcher

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
// found"), so the next start creates it again under the same id, the
// prompt the killed Claude never took goes to it (once) and is answered,
// and so are the next prompts. Without looking at the transcript every
// later start was --resume, refused: the session was dead for good; and
// the prompt was rejected, though the user expects it to be answered.
func TestRemoteKilledBeforeTranscript(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		map[string]any{"initExit": 137},
		steps(map[string]any{"text": "answer one"}),
		steps(map[string]any{"text": "answer two"}),
		steps(map[string]any{"text": "answer three"}),
	}}, RemoteOptions{})
	if err := rig.promptErr("one"); err != nil {
		t.Fatalf("the prompt the killed Claude never took: %v", err)
	}
	rig.until("the answer to one", has("A(answer one)", 1))
	if err := rig.promptErr("two"); err != nil {
		t.Fatalf("the next prompt: %v", err)
	}
	rig.until("the answer", has("A(answer two)", 1))
	if err := rig.promptErr("three"); err != nil {
		t.Fatalf("the prompt after: %v", err)
	}
	d := rig.until("the third answer", has("A(answer three)", 1))
	wantInOrder(t, d, "U(one)", "A(answer one)", "TE(completed)", "U(two)", "A(answer two)", "TE(completed)", "U(three)", "A(answer three)")
	if n := count(d, "U(one)"); n != 1 {
		t.Fatalf("the prompt %d times: %q", n, d)
	}
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

// Claude killed while it waits for the model: it had taken the prompt (its
// transcript holds it, and the next Claude has it in its context) but not
// echoed it yet. The prompt is done, never "stopped before taking the
// prompt"; its text is in the live stream once, with the transcript's id;
// the turn ends failed with the note; the next prompt continues the
// session. Without the transcript's word the prompt was rejected and its
// text missing: a user who sent it again gave Claude the same prompt twice.
func TestRemoteKilledWaitingForModel(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		map[string]any{"lateEcho": true, "steps": []any{map[string]any{"exit": 137}}},
		steps(map[string]any{"text": "answer two"}),
	}}, RemoteOptions{})
	if err := rig.promptErr("one"); err != nil {
		t.Fatalf("the prompt Claude took: %v", err)
	}
	d := rig.until("the failed turn", has("TE(failed)", 1))
	wantInOrder(t, d, "U(one)", "S(Claude Code stopped unexpectedly: exit status 137)", "TE(failed)")
	if err := rig.promptErr("two"); err != nil {
		t.Fatalf("the next prompt: %v", err)
	}
	rig.until("the answer", has("A(answer two)", 1))
	if argv := rig.argv(); len(argv) != 2 || !slices.Contains(argv[1], "--resume="+rig.r.ID()) {
		t.Fatalf("argv %q: the session is not continued", argv)
	}
	rig.r.Stop(protocol.StatusCompleted)
	live := rig.checkTurns()
	want := replayFiles(t, claude.TranscriptPath(rig.r.opts.ProjectDir, rig.r.ID()))
	ld := describeAll(live)
	if n := count(ld, "U(one)"); n != 1 {
		t.Fatalf("the prompt %d times live: %q", n, ld)
	}
	liveOnlyCrash(t, live, want)
}

// A slash command Claude took and recorded, and never echoed before it
// was killed: the transcript has it as Claude records a command, under the
// name Claude gives it (/cost is recorded as /usage), so it is done, not
// rejected, and shown once; the next prompt continues the session.
func TestRemoteKilledAfterSlashCommand(t *testing.T) {
	for _, tc := range []struct {
		name, command string
		recorded      any
		want          string
	}{
		{"with arguments", "/compact keep it short", true, "U(/compact keep it short)"},
		{"under another name", "/cost", "usage", "U(/usage)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newRemoteRig(t, map[string]any{"turns": []any{
				map[string]any{"lateEcho": true, "command": tc.recorded, "steps": []any{map[string]any{"exit": 137}}},
				steps(map[string]any{"text": "answer two"}),
			}}, RemoteOptions{})
			if err := rig.promptErr(tc.command); err != nil {
				t.Fatalf("the command Claude took: %v", err)
			}
			d := rig.until("the failed turn", has("TE(failed)", 1))
			if n := count(d, tc.want); n != 1 {
				t.Fatalf("the command %d times: %q", n, d)
			}
			if err := rig.promptErr("two"); err != nil {
				t.Fatalf("the next prompt: %v", err)
			}
			rig.until("the answer", has("A(answer two)", 1))
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
		// The end of a call Claude left and the note of a turn it cut have
		// replay's ids; live's texts say how Claude ended.
		if j < len(want) && live[i].ID == want[j].ID && (ld[i] == wd[j] || live[i].Ev.T == want[j].Ev.T && (live[i].Ev.T == protocol.KindService || live[i].Ev.T == protocol.KindToolCallEnd)) {
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

// withoutCrashNotes is live without what liveOnlyCrash lets live alone
// have (how Claude ended): what the transcript can hold.
func withoutCrashNotes(live []protocol.Envelope) []protocol.Envelope {
	var out []protocol.Envelope
	for _, env := range live {
		if d := envtest.Describe(env); !strings.Contains(d, "Claude Code exited while this tool ran") && !strings.HasPrefix(d, "SVC(Claude Code stopped unexpectedly") {
			out = append(out, env)
		}
	}
	return out
}

// Prompts queued behind one Claude took without echoing it when it was
// killed: the first is done; the one it never took goes to the next
// Claude, once, and is answered there.
func TestRemoteKilledWaitingForModelQueued(t *testing.T) {
	rig := newRemoteRig(t, map[string]any{"turns": []any{
		map[string]any{"lateEcho": true, "steps": []any{map[string]any{"sleepMs": 300}, map[string]any{"exit": 137}}},
		steps(map[string]any{"text": "answer"}),
	}}, RemoteOptions{})
	var waits []func(context.Context) error
	for _, text := range []string{"one", "two"} {
		wait, err := rig.r.SendPrompt(text)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, wait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := waits[0](ctx); err != nil {
		t.Fatalf("the prompt Claude took: %v", err)
	}
	if err := waits[1](ctx); err != nil {
		t.Fatalf("the prompt the killed Claude never took: %v", err)
	}
	d := rig.until("the answer", has("A(answer)", 1))
	wantInOrder(t, d, "U(one)", "TE(failed)", "U(two)", "A(answer)")
	if count(d, "U(one)") != 1 || count(d, "U(two)") != 1 {
		t.Fatalf("envelopes %q", d)
	}
}

func TestPromptsWritten(t *testing.T) {
	user := func(uuid string, texts ...string) string {
		var blocks []map[string]any
		for _, x := range texts {
			blocks = append(blocks, map[string]any{"type": "text", "text": x})
		}
		b, _ := json.Marshal(map[string]any{"type": "user", "uuid": uuid, "userType": "external", "message": map[string]any{"role": "user", "content": blocks}})
		return string(b)
	}
	result, _ := json.Marshal(map[string]any{"type": "user", "uuid": "r1", "message": map[string]any{"role": "user",
		"content": []map[string]any{{"type": "tool_result", "tool_use_id": "t1", "content": "yes"}}}})
	queue := `{"type":"queue-operation","operation":"enqueue","content":"yes"}`
	// A slash command is recorded as its markup, not as the text written.
	command := func(uuid, name, args string) string {
		b, _ := json.Marshal(map[string]any{"type": "user", "uuid": uuid, "message": map[string]any{"role": "user",
			"content": "<command-name>/" + name + "</command-name>\n            <command-message>" + name + "</command-message>\n            <command-args>" + args + "</command-args>"}})
		return string(b)
	}
	for _, tc := range []struct {
		name  string
		lines []string
		after string
		texts []string
		want  []string // uuids of the records taken
		n     int
	}{
		{"one", []string{queue, user("u1", "yes")}, "", []string{"yes", "no"}, []string{"u1"}, 1},
		{"none", []string{queue, string(result)}, "", []string{"yes"}, nil, 0},
		{"taken together", []string{user("u1", "two\n", "three")}, "", []string{"two", "three"}, []string{"u1"}, 2},
		{"the same text echoed before", []string{user("u1", "yes"), user("u2", "no")}, "u2", []string{"yes"}, nil, 0},
		{"the same text after the echo", []string{user("u1", "yes"), user("u2", "no"), user("u3", "yes")}, "u2", []string{"yes"}, []string{"u3"}, 1},
		{"the echo written before the offset", []string{user("u3", "yes")}, "u0", []string{"yes"}, []string{"u3"}, 1},
		{"not ours", []string{user("u1", claude.InterruptedText), user("u2", "other")}, "", []string{"yes"}, nil, 0},
		{"in order only", []string{user("u1", "second")}, "", []string{"first", "second"}, nil, 0},
		{"a cut line", []string{user("u1", "yes")[:20]}, "", []string{"yes"}, nil, 0},
		{"a slash command", []string{command("c1", "compact", "keep it short")}, "", []string{"/compact  keep it short"}, []string{"c1"}, 1},
		{"a slash command without arguments", []string{command("c1", "cost", "")}, "", []string{"/cost"}, []string{"c1"}, 1},
		{"then a prompt", []string{command("c1", "cost", ""), user("u1", "yes")}, "", []string{"/cost", "yes"}, []string{"c1", "u1"}, 2},
		{"under another name", []string{command("c1", "usage", "")}, "", []string{"/cost"}, []string{"c1"}, 1},
		{"a prompt is no command", []string{user("u1", "/cost")}, "", []string{"/context"}, nil, 0},
		{"other arguments", []string{command("c1", "compact", "keep it short")}, "", []string{"/compact"}, nil, 0},
		{"not a command", []string{command("c1", "tmp", "x is missing")}, "", []string{"/tmp/x is missing"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			content := strings.Join(tc.lines, "\n")
			if tc.name != "a cut line" {
				content += "\n"
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			recs, n := promptsWritten(path, 0, tc.after, tc.texts)
			var got []string
			for _, r := range recs {
				got = append(got, r.UUID)
			}
			if n != tc.n || !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, %d; want %q, %d", got, n, tc.want, tc.n)
			}
		})
	}
}

func TestPromptTaken(t *testing.T) {
	user := func(uuid string, texts ...string) string {
		var blocks []map[string]any
		for _, x := range texts {
			blocks = append(blocks, map[string]any{"type": "text", "text": x})
		}
		b, _ := json.Marshal(map[string]any{"type": "user", "uuid": uuid, "message": map[string]any{"role": "user", "content": blocks}})
		return string(b) + "\n"
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	early := user("u0", "yes")
	content := early + user("u1", "yes") + user("u2", "second\n", "third") + user("u3", claude.InterruptedText)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	claimed := map[string]bool{}
	claim := func(u string) bool { return claimed[u] }
	at := int64(len(early))
	for _, tc := range []struct{ text, want string }{
		{"yes", "u1"}, {"yes", ""}, {"third", "u2"}, {"second", "u2"}, {"no", ""},
	} {
		got := PromptTaken(path, at, tc.text, claim)
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.text, got, tc.want)
		}
		if got != "" && tc.text == "yes" {
			claimed[got] = true
		}
	}
	if got := PromptTaken(filepath.Join(t.TempDir(), "none.jsonl"), 0, "yes", nil); got != "" {
		t.Errorf("no transcript: %q", got)
	}
}
