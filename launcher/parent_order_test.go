package launcher

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/scanner"
)

// Claude Code 2.1.197, answering fast, writes the answer and the turn's
// turn_duration before the user record of the prompt they answer (the
// answer's parentUuid names it). Live, the scanner holds the answer until
// the prompt is written and the pipeline maps them in parent order: the
// phone shows the prompt, then the turn, as replay of the transcript
// does. Mapped as written, the phone got the turn, and the prompt after
// it ended.
func TestLiveParentOrder(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	const sess = "5e55a0a0-3333-4444-8555-666666666666"
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), project)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(projectDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := claude.TranscriptPath(projectDir, sess)
	t0 := time.Now().UTC()
	at := func(ms int) string { return t0.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	first := []string{
		`{"parentUuid":"u1","isSidechain":false,"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"answer in the terminal"}]},"uuid":"a1","timestamp":"` + at(44) + `"}`,
		`{"parentUuid":"a1","isSidechain":false,"type":"system","subtype":"turn_duration","durationMs":44,"uuid":"d1","timestamp":"` + at(45) + `"}`,
	}
	prompt := `{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"typed in the terminal"},"uuid":"u1","timestamp":"` + at(0) + `"}`
	if err := os.WriteFile(path, []byte(strings.Join(first, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &lockedOutbox{}
	pipe := NewPipeline("", out)
	// A clock that stands still: only the prompt ends the hold.
	frozen := func() time.Time { return t0.Add(time.Second) }
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, PollInterval: 20 * time.Millisecond, Logger: log, Now: frozen}, pipe)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	sc.AddSession(sess)
	// Passes read the answer and hold it.
	for range 3 {
		select {
		case <-sc.Synced():
		case <-time.After(untilLimit):
			t.Fatal("no pass of the scanner")
		}
	}
	if d := describeAll(out.of(sess)); len(d) != 0 {
		t.Fatalf("mapped before the prompt was written: %q", d)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(prompt + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := []string{"U(typed in the terminal)", "TS", "A(answer in the terminal)", "TE(completed)"}
	got := untilSession(t, out, sess, "the turn", func(d []string) bool { return len(d) >= len(want) })
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("live %q, want %q", got, want)
	}
	live := out.of(sess)
	replayed := replayFiles(t, path)
	for i := range replayed {
		if i >= len(live) || live[i].ID != replayed[i].ID {
			t.Fatalf("live differs from replay\nlive:   %q\nreplay: %q", got, describeAll(replayed))
		}
	}
}

// The same with Claude in the terminal (local mode, the fake Claude
// writing the transcript as 2.1.197 did: the answer and turn_duration,
// then, 300 ms later, the prompt): the phone shows the prompt, then the
// turn, as replay does.
func TestLocalPromptWrittenAfterItsAnswer(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	const sess = "5e55a0a0-4444-4555-8666-777777777777"
	ts := time.Now().UTC()
	at := func(ms int) string { return ts.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	writeJSON(t, local, map[string]any{"lines": []string{
		`{"parentUuid":"lu","isSidechain":false,"type":"assistant","sessionId":"{{session}}","message":{"id":"msg_la","role":"assistant","content":[{"type":"text","text":"answer in the terminal"}]},"uuid":"la","timestamp":"` + at(44) + `"}`,
		`{"parentUuid":"la","isSidechain":false,"type":"system","subtype":"turn_duration","durationMs":44,"sessionId":"{{session}}","uuid":"ld","timestamp":"` + at(45) + `"}`,
		`{"parentUuid":null,"isSidechain":false,"type":"user","sessionId":"{{session}}","message":{"role":"user","content":"typed in the terminal"},"uuid":"lu","timestamp":"` + at(0) + `"}`,
	}, "intervalMs": 300, "hang": true})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	sr := startScan(t, home, project, out, log)
	cmds := make(chan Command)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: sr.pipe, Scanner: sr.sc, Commands: cmds, Events: ev, Logger: log,
	})
	rig := &remoteRig{t: t, out: out, ev: ev}
	rig.until("the terminal's turn", has("TE(completed)", 1))
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	live := describeAll(rig.checkTurns())
	want := []string{"U(typed in the terminal)", "TS", "A(answer in the terminal)", "TE(completed)"}
	if strings.Join(live, " ") != strings.Join(want, " ") {
		t.Fatalf("live %q, want %q", live, want)
	}
	replayed := describeAll(replayFiles(t, claude.TranscriptPath(sr.projectDir, sess)))
	if strings.Join(replayed, " ") != strings.Join(want, " ") {
		t.Fatalf("replay %q, want %q", replayed, want)
	}
}
