package launcher

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A /clear from the app moves the loop to Claude's new session: the app is
// told its state, and the terminal taking the session back resumes the
// conversation after the clear, not the one before.
func TestLoopFollowsClear(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	stream := filepath.Join(t.TempDir(), "stream.json")
	arglog := filepath.Join(t.TempDir(), "args")
	const sess = "77777777-2222-4333-8444-555555555555"
	writeJSON(t, local, map[string]any{"lines": []string{}, "hang": true})
	writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "one"}), steps(map[string]any{"text": "two"})}})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local, "FAKE_CLAUDE_STREAM=" + stream, "FAKE_CLAUDE_ARGLOG=" + arglog}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &lockedOutbox{}
	sr := startScan(t, home, project, out, log)
	pipe, projectDir := sr.pipe, sr.projectDir
	keysR, keysW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer keysR.Close()
	defer keysW.Close()
	cmds := make(chan Command)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:  fakeLocal(project, env, log),
		Remote: RemoteOptions{StopTimeout: time.Second}, StartRemote: true, Session: sess,
		Pipeline: pipe, Scanner: sr.sc, Commands: cmds, Events: ev, Keys: keysR, Logger: log,
	})
	send := func(id, text string) {
		t.Helper()
		replies := sendPrompt(cmds, id, text)
		select {
		case err := <-replies:
			if err != nil {
				t.Fatalf("prompt %q: %v", text, err)
			}
		case <-time.After(untilLimit):
			t.Fatalf("prompt %q not done", text)
		}
	}
	send("c1", "first")
	untilSession(t, out, sess, "the first turn", has("TE(completed)", 1))
	send("c2", "/clear")
	send("c3", "second")
	var second string
	deadline := time.Now().Add(untilLimit)
	for second == "" {
		ents, _ := os.ReadDir(projectDir)
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok && id != sess {
				second = id
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no session after /clear")
		}
		time.Sleep(5 * time.Millisecond)
	}
	untilSession(t, out, second, "the turn after /clear", has("A(two)", 1))

	started := len(readArgLog(t, arglog))
	keysW.Write([]byte("  "))
	waitFor(t, "local mode", func() bool { return ev.last().Mode == "local" })
	// The terminal's Claude writes its arguments as it starts, which may
	// come after the loop says it is in local mode.
	waitFor(t, "the terminal's Claude started", func() bool { return len(readArgLog(t, arglog)) > started })
	argv := readArgLog(t, arglog)
	if last := argv[len(argv)-1]; !slices.Contains(last, "--resume="+second) {
		t.Fatalf("the terminal's Claude started with %q, want --resume=%s", last, second)
	}
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
}
