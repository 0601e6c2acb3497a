package launcher

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// Claude started in the terminal (its SessionStart hook ran) and got no
// prompt before the app sent one: it wrote no transcript, so it has no
// session to resume. Remote mode starts the session under its id
// (--session-id) and the prompt is answered; taking the hook's word that
// the session exists, it started Claude with --resume, which Claude
// refuses ("No conversation found"), and every prompt was rejected.
func TestLoopTakeOverBeforeAnyPrompt(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	stream := filepath.Join(t.TempDir(), "stream.json")
	const sess = "77777777-2222-4333-8444-555555555555"
	writeJSON(t, local, map[string]any{"lines": []string{}, "hang": true})
	writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "remote answer"})}})
	arglog := filepath.Join(t.TempDir(), "args")
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local, "FAKE_CLAUDE_STREAM=" + stream, "FAKE_CLAUDE_ARGLOG=" + arglog}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	sr := startScan(t, home, project, out, log)
	pipe := sr.pipe
	cmds := make(chan Command)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: pipe, Scanner: sr.sc, Commands: cmds, Events: ev, Logger: log,
	})
	defer func() {
		cancel()
		if r := <-done; r.err != nil {
			t.Error(r.err)
		}
	}()
	waitFor(t, "local mode announced", func() bool { return ev.last().Mode == "local" })
	replies := sendPrompt(cmds, "c1", "from the app")
	select {
	case err := <-replies:
		if err != nil {
			t.Fatalf("the app's prompt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the app's prompt was never answered")
	}
	rig := &remoteRig{t: t, out: out, ev: ev}
	rig.until("the remote answer", has("A(remote answer)", 1))
	argv := readArgLog(t, arglog)
	if len(argv) != 2 || !slices.Contains(argv[1], "--session-id="+sess) {
		t.Fatalf("argv of the starts: %q", argv)
	}
}

// ccrelay stopped (its context ends: SIGTERM) while Claude waits for the
// model with the prompt in its transcript: the prompt is done, since
// Claude took it, not rejected with "context canceled". The wait for
// Claude ends when Claude does, which the loop's end brings.
func TestLoopEndsWhileClaudeWaitsForModel(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	stream := filepath.Join(t.TempDir(), "stream.json")
	writeJSON(t, stream, map[string]any{"turns": []any{map[string]any{"lateEcho": true, "steps": []any{map[string]any{"sleepMs": 60000}}}}})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + stream}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const sess = "88888888-2222-4333-8444-555555555555"
	out := &MemOutbox{}
	cmds := make(chan Command)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    LocalOptions{Claude: fakeClaude, Dir: project, Env: env, Logger: log},
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: NewPipeline("", out), Commands: cmds, Events: &events{},
		StartRemote: true, Session: sess, Logger: log,
	})
	reply := make(chan error, 1)
	cmds <- Command{Command: protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "hello"}, Reply: func(err error) { reply <- err }}
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), project)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the prompt in Claude's transcript", func() bool {
		st, _ := readTranscriptState(claude.TranscriptPath(projectDir, sess))
		return st == transcriptMessages
	})
	cancel()
	select {
	case err := <-reply:
		if err != nil {
			t.Fatalf("the prompt Claude took: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the prompt was never answered")
	}
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	// Its text is shown once, with the transcript's id.
	if d := describeAll(out.Envelopes()); count(d, "U(hello)") != 1 {
		t.Fatalf("envelopes %q", d)
	}
}
