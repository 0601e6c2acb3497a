package launcher

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/protocol"
)

func TestIsSlashCommand(t *testing.T) {
	for text, want := range map[string]bool{
		"/clear": true, " /compact keep it short": true, "/plugin:cmd x": true, "/my-command": true,
		"/": false, "/tmp/x is missing": false, "/etc/passwd": false, "/a.txt": false, "hello /clear": false, "//x": false,
	} {
		if got := isSlashCommand(text); got != want {
			t.Errorf("isSlashCommand(%q) = %v, want %v", text, got, want)
		}
	}
}

// A /clear sent from the app (Claude as 2.1.330 runs it: no echo, a
// conversation_reset, then the init of a new session): the prompt is taken,
// the old session ends with a note, the command is the first envelope of
// the new session, the next prompt is answered there, and a Claude started
// again after a crash resumes the new session.
func TestRemoteClear(t *testing.T) {
	base := newRemoteRig(t, map[string]any{"turns": []any{
		steps(map[string]any{"text": "one"}),
		steps(map[string]any{"text": "two"}),
		steps(map[string]any{"text": "three"}),
	}}, RemoteOptions{})
	out := &lockedOutbox{}
	var mu sync.Mutex
	var moved []string
	opts := base.r.opts
	opts.OnSession = func(id string) {
		mu.Lock()
		defer mu.Unlock()
		moved = append(moved, id)
	}
	r := NewRemote(rigSession, opts, NewPipeline("", out), base.ev)
	t.Cleanup(func() { r.Stop(protocol.StatusCancelled) })
	prompt := promptWithin(t, r, 10*time.Second)
	prompt("first")
	untilSession(t, out, rigSession, "the first turn", has("TE(completed)", 1))
	prompt("/clear")
	second := movedFrom(r, rigSession, 10*time.Second)
	if second == rigSession || !ValidSessionID(second) {
		t.Fatalf("session after /clear: %q", second)
	}
	prompt("second")
	d := untilSession(t, out, second, "the turn after /clear", has("TE(completed)", 1))
	envtest.Eq(t, d, "U(/clear)", "U(second)", "TS", "A(two)", "TE(completed)")
	envtest.Eq(t, describeAll(out.of(rigSession)), "U(first)", "TS", "A(one)", "TE(completed)",
		"TS", "S(Conversation cleared (/clear): Claude starts afresh from here)", "TE(completed)")
	mu.Lock()
	if !slices.Equal(moved, []string{second}) {
		t.Errorf("told of sessions %q, want [%s]", moved, second)
	}
	mu.Unlock()

	<-killClaude(t, r).done
	prompt("third")
	untilSession(t, out, second, "the turn after the restart", has("TE(completed)", 2))
	argv := base.argv()
	if last := argv[len(argv)-1]; !slices.Contains(last, "--resume="+second) {
		t.Fatalf("Claude started again with %q, want --resume=%s", strings.Join(last, " "), second)
	}
	envtest.CheckInvariants(t, out.of(second))
}

// promptWithin is a prompt to r that fails the test when it is not done
// within wait.
func promptWithin(t *testing.T, r *Remote, wait time.Duration) func(text string) {
	return func(text string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := r.Prompt(ctx, text); err != nil {
			t.Fatalf("prompt %q: %v", text, err)
		}
	}
}

// movedFrom polls, up to wait, until r follows Claude from session old to
// another (Claude names its new session in the init after a reset); it is
// r's session then, still old when it did not move.
func movedFrom(r *Remote, old string, wait time.Duration) string {
	id := r.ID()
	for deadline := time.Now().Add(wait); id == old && time.Now().Before(deadline); id = r.ID() {
		time.Sleep(5 * time.Millisecond)
	}
	return id
}

// killClaude kills the Claude r runs (its process tree), as a crash
// would, and returns it: its done closes once r has seen it end.
func killClaude(t *testing.T, r *Remote) *process {
	t.Helper()
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if err := p.tree.kill(); err != nil {
		t.Fatal(err)
	}
	return p
}
