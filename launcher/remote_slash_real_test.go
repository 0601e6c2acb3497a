package launcher

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// untilSession polls (with a deadline) until cond holds for what session
// was sent.
func untilSession(t *testing.T, out *lockedOutbox, session, what string, cond func(d []string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		d := describeAll(out.of(session))
		if cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s in session %s; envelopes: %q", what, session, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sameContentAsReplay checks that live has the envelopes (ids, kinds,
// order) of the replay of transcript, turn markers aside: a -p transcript
// does not say where a turn ended.
func sameContentAsReplay(t *testing.T, live []protocol.Envelope, transcript string) {
	t.Helper()
	envtest.CheckInvariants(t, live)
	want := withoutTurnMarkers(replayFiles(t, transcript))
	live = withoutTurnMarkers(live)
	ld, wd := describeAll(live), describeAll(want)
	if len(live) != len(want) {
		t.Fatalf("live %d envelopes, replay %d\nlive:   %q\nreplay: %q", len(live), len(want), ld, wd)
	}
	for i := range live {
		if live[i].ID != want[i].ID {
			t.Fatalf("envelope %d: live %s (%s), replay %s (%s)", i, ld[i], live[i].ID, wd[i], want[i].ID)
		}
	}
}

// /clear and /compact sent from the app to the real Claude Code: each is
// taken (its prompt done) and shown as the command it is; /clear moves the
// session to Claude's new session id, whose transcript it then is (live =
// replay for both sessions), the next prompt is answered there, and a
// Claude started again after a crash resumes the conversation after the
// clear, not the one before.
func TestRealClaudeRemoteClearAndCompact(t *testing.T) {
	e := claudetest.New(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("answer")}})
	out := &lockedOutbox{}
	var movedMu sync.Mutex
	var moved []string
	opts := RemoteOptions{Claude: e.Claude, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSession: func(id string) {
			movedMu.Lock()
			defer movedMu.Unlock()
			moved = append(moved, id)
		}}
	first := claude.NewSessionID()
	r := NewRemote(first, opts, NewPipeline("", out), &events{})
	t.Cleanup(func() { r.Stop(protocol.StatusCancelled) })
	prompt := promptWithin(t, r, 60*time.Second)
	idle := func(what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for r.State().Status != StatusIdle {
			if time.Now().After(deadline) {
				t.Fatalf("not idle after %s: %+v", what, r.State())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	prompt("hello one")
	untilSession(t, out, first, "the first turn", has("TE(completed)", 1))
	prompt("/compact keep it short")
	idle("/compact")
	prompt("/clear")
	second := movedFrom(r, first, 60*time.Second)
	if second == first || !ValidSessionID(second) {
		t.Fatalf("session after /clear: %q (before: %q)", second, first)
	}
	idle("/clear")
	movedMu.Lock()
	if !slices.Equal(moved, []string{second}) {
		t.Errorf("told of sessions %q, want %q", moved, second)
	}
	movedMu.Unlock()
	prompt("hello two")
	d := untilSession(t, out, second, "the turn after /clear", func(d []string) bool { return count(d, "TE(completed)") == 1 })
	envtest.Eq(t, d, "U(/clear)", "U(hello two)", "TS", "A(answer)", "TE(completed)")
	idle("hello two")
	if last := out.of(second)[0]; last.Ev.Command == nil || last.Ev.Command.Name != "/clear" {
		t.Fatalf("/clear shown as %+v", last.Ev)
	}
	old := describeAll(out.of(first))
	if count(old, "U(/compact keep it short)") != 1 || count(old, "S(Conversation compacted") != 1 ||
		old[len(old)-2] != "S(Conversation cleared (/clear): Claude starts afresh from here)" || old[len(old)-1] != "TE(completed)" {
		t.Fatalf("the session before /clear: %q", old)
	}

	// Claude dies; the next prompt starts it again on the session after
	// the clear. It prints before it writes its transcript: it dies once
	// the transcript holds what live sent, or the restarted Claude lacks
	// that and live cannot equal replay.
	untilTranscriptHas(t, filepath.Join(e.ProjectDir(t), second+".jsonl"), func() []protocol.Envelope { return out.of(second) })
	<-killClaude(t, r).done
	prompt("hello three")
	untilSession(t, out, second, "the turn after the restart", func(d []string) bool { return count(d, "TE(completed)") == 2 })
	reqs := e.API.Requests()
	said := reqs[len(reqs)-1].UserContent
	if !strings.Contains(said, "hello two") || strings.Contains(said, "hello one") {
		t.Fatalf("the restarted Claude's conversation: %s", said)
	}
	untilTranscriptHas(t, filepath.Join(e.ProjectDir(t), second+".jsonl"), func() []protocol.Envelope { return out.of(second) })
	r.Stop(protocol.StatusCompleted)
	var withoutNote []protocol.Envelope
	for _, env := range out.of(first) {
		if !strings.HasPrefix(env.Ev.Text, "Conversation cleared") {
			withoutNote = append(withoutNote, env)
		}
	}
	sameContentAsReplay(t, withoutNote, filepath.Join(e.ProjectDir(t), first+".jsonl"))
	sameContentAsReplay(t, out.of(second), filepath.Join(e.ProjectDir(t), second+".jsonl"))
}

// Slash commands the real Claude Code runs itself and answers without a
// word of the model (/context, /cost, /model): it echoes none of them, and
// prints their output as a message of its own. Each prompt is taken (done,
// in order, the session idle after), and each command shows as the
// transcript's replay shows it (/cost is recorded as /usage).
func TestRealClaudeRemoteLocalCommands(t *testing.T) {
	rig, e := realRemote(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("answer")}})
	prompt := promptWithin(t, rig.r, 60*time.Second)
	prompt("hello one")
	prompt("/context")
	prompt("/cost")
	prompt("hello two")
	rig.untilState("idle", func(s SessionState) bool { return s.Status == StatusIdle })
	prompts := func() []protocol.Envelope {
		var out []protocol.Envelope
		for _, env := range rig.out.Envelopes() {
			if env.Role == protocol.RoleUser {
				out = append(out, env)
			}
		}
		return out
	}
	// Claude prints before it writes its transcript, and one stopped
	// before it wrote a batch never writes it.
	untilTranscriptHas(t, filepath.Join(e.ProjectDir(t), rig.r.ID()+".jsonl"), prompts)
	rig.r.Stop(protocol.StatusCompleted)
	users := func(envs []protocol.Envelope) (ids, d []string) {
		for _, env := range envs {
			if env.Role == protocol.RoleUser {
				ids, d = append(ids, env.ID), append(d, describe(env))
			}
		}
		return ids, d
	}
	liveIDs, live := users(rig.checkTurns())
	wantIDs, want := users(replayFiles(t, filepath.Join(e.ProjectDir(t), rig.r.ID()+".jsonl")))
	if !slices.Equal(live, []string{"U(hello one)", "U(/context)", "U(/usage)", "U(hello two)"}) || !slices.Equal(liveIDs, wantIDs) {
		t.Fatalf("prompts live %q (%q), replay %q (%q)", live, liveIDs, want, wantIDs)
	}
}

// The older Claude Code versions CI runs (2.1.197) print no
// conversation_reset for a /clear: the init of the new session, and the
// command's output as a message of its own. The prompt is taken, the
// session moves to the new one, which starts with the /clear command, and
// the next prompt is answered there.
func TestRealClaudeRemoteClearOlderVersions(t *testing.T) {
	for _, in := range claudetest.Installs(t) {
		if c, ok := claude.CompareVersions(in.Version, "2.1.330"); !ok || c >= 0 {
			continue
		}
		t.Run(in.Version, func(t *testing.T) {
			e := claudetest.NewWith(t, in.Path, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("answer")}})
			out := &lockedOutbox{}
			opts := RemoteOptions{Claude: e.Claude, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			first := claude.NewSessionID()
			r := NewRemote(first, opts, NewPipeline("", out), &events{})
			t.Cleanup(func() { r.Stop(protocol.StatusCancelled) })
			prompt := promptWithin(t, r, 60*time.Second)
			prompt("hello one")
			untilSession(t, out, first, "the first turn", has("TE(completed)", 1))
			prompt("/clear")
			second := movedFrom(r, first, 60*time.Second)
			if second == first {
				t.Fatal("the session did not follow Claude to its new session")
			}
			prompt("hello two")
			d := untilSession(t, out, second, "the answer after /clear", has("A(answer)", 1))
			if d[0] != "U(/clear)" || count(d, "U(hello two)") != 1 {
				t.Fatalf("the session after /clear: %q", d)
			}
		})
	}
}
