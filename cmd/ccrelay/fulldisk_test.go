package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/synth"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/replay"
	"github.com/ccrelay/ccrelay/scanner"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// disk makes the outbox's log writes fail part-way with ENOSPC while full.
type disk struct {
	mu       sync.Mutex
	full     bool
	failures int
}

func (d *disk) setFull(full bool) {
	d.mu.Lock()
	d.full = full
	d.mu.Unlock()
}

func (d *disk) failed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failures
}

func (d *disk) open(path string) (apiclient.LogFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	return &diskFile{LogFile: f, d: d}, nil
}

type diskFile struct {
	apiclient.LogFile
	d *disk
}

// WriteAt writes half of p, then fails, while the disk is full.
func (f *diskFile) WriteAt(p []byte, off int64) (int, error) {
	f.d.mu.Lock()
	full := f.d.full
	if full {
		f.d.failures++
	}
	f.d.mu.Unlock()
	if !full {
		return f.LogFile.WriteAt(p, off)
	}
	n, err := f.LogFile.WriteAt(p[:len(p)/2], off)
	if err != nil {
		return n, err
	}
	return n, syscall.ENOSPC
}

// sender is an outbox on a disk and a client sending it to a relay.
type sender struct {
	box    *apiclient.Outbox
	client *apiclient.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startSender(t *testing.T, dir string, d *disk, base, token string) *sender {
	t.Helper()
	box, err := apiclient.OpenOutboxWith(dir, apiclient.OutboxOptions{OpenLog: d.open, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	s := &sender{box: box, done: make(chan struct{}),
		client: apiclient.NewClient(apiclient.Config{URL: base, Token: token, Logger: discard,
			MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}, box)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { defer close(s.done); s.client.Run(ctx) }()
	return s
}

// stop flushes (when asked), stops the client and closes the outbox.
func (s *sender) stop(t *testing.T, flush bool) {
	t.Helper()
	if flush {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := s.client.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.cancel()
	<-s.done
	s.box.Close()
}

// Local mode on a disk that fills up: the scanner follows a transcript into
// the relay's outbox; when the disk is full the outbox refuses the append
// (written part-way, then cut back), so the scanner retries without moving
// its cursor; once the space is back the same run delivers the rest, and
// the relay ends with exactly `ccrelay replay --format jsonl` of the
// transcript.
func TestLocalModeFullDiskToRelay(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	src, err := synth.Load(corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var whole bytes.Buffer
	if _, err := synth.Write(&whole, 8<<20, src); err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(whole.Bytes(), []byte("\n"))
	const id = "0e0e0e0e-1111-4222-8333-444444444444"
	projectDir := t.TempDir()
	transcript := claude.TranscriptPath(projectDir, id)
	tf, err := os.Create(transcript)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	half := len(lines) / 2
	tf.Write(bytes.Join(lines[:half], nil))
	state := t.TempDir()
	d := &disk{}

	// start is one ccrelay: scanner, pipeline, outbox, client. It returns
	// the sender and the scanner's result.
	start := func() (*sender, context.CancelFunc, chan error) {
		s := startSender(t, filepath.Join(state, "outbox"), d, base, token)
		pipe := launcher.NewPipeline("", s.box)
		sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, CursorFile: filepath.Join(state, "cursor.json"),
			PollInterval: 10 * time.Millisecond, Logger: discard}, pipe)
		if err != nil {
			t.Fatal(err)
		}
		sc.AddSession(id)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sc.Run(ctx) }()
		return s, cancel, done
	}
	s, stopScan, scanDone := start()
	waitStored(t, data, id, 100)
	d.setFull(true)
	tf.Write(bytes.Join(lines[half:], nil))
	// The scanner meets the full disk and keeps retrying (its cursor stays
	// where the outbox stopped taking envelopes).
	for deadline := time.Now().Add(30 * time.Second); d.failed() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the scanner never met the full disk")
		}
	}
	select {
	case err := <-scanDone:
		t.Fatalf("the scanner gave up on a full disk: %v", err)
	default:
	}
	// The space is back: the same run goes on and delivers the rest.
	d.setFull(false)
	stopScan() // Claude is gone: one last pass reads everything
	if err := <-scanDone; err != nil {
		t.Fatal(err)
	}
	s.stop(t, true)
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", transcript).stdout, "\n"), "\n")
	if d.failed() == 0 || len(want) < 1000 {
		t.Fatalf("%d failed writes, %d envelopes: not a test of a full disk", d.failed(), len(want))
	}
	sameLines(t, storedLines(t, data, id), want)
}

// replay --to (paced, so it goes on after a failed append, as --speed
// does) on a disk that fills up and empties again: appends fail part-way
// and are retried with the envelopes kept; the relay ends with exactly
// `ccrelay replay --format jsonl` of the session (the case where 51 of 634
// envelopes were lost).
func TestReplayToFullDisk(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	main := corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", main).stdout, "\n"), "\n")
	sess, err := replay.FindSession([]string{main})
	if err != nil {
		t.Fatal(err)
	}
	d := &disk{}
	openOutboxLog = d.open
	defer func() { openOutboxLog = nil }()
	rs, err := startRelaySender(base, token, t.TempDir(), sess.ID, discard)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if _, err := replay.Run(context.Background(), sess, replay.Options{}, func(e *protocol.Envelope) error {
		n++
		switch n {
		case 200:
			d.setFull(true)
		case 350: // before 200 wait: emit would return the error
			d.setFull(false)
		}
		if err := rs.emit(e); err != nil {
			return err
		}
		if n%20 == 0 {
			rs.syncIfAny() // as paced does before a wait
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := rs.finish(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if d.failed() < 5 {
		t.Fatalf("only %d failed writes: not a test of a full disk", d.failed())
	}
	sameLines(t, storedLines(t, data, sess.ID), want)
}

// Remote mode on a disk that fills up during a turn and empties again:
// what Claude did in the full-disk turn is kept by the pipeline and
// appended first once the space is back; the relay ends with exactly the
// envelopes of `ccrelay replay --format jsonl` of the transcript Claude
// wrote (ids, in order).
func TestRemoteModeFullDiskToRelay(t *testing.T) {
	buildFakeClaude(t)
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	home, project := t.TempDir(), t.TempDir()
	turn := func(k string) map[string]any {
		return map[string]any{"steps": []any{
			map[string]any{"text": "answer " + k},
			map[string]any{"tool": map[string]any{"id": "toolu_" + k, "name": "Bash", "input": map[string]any{"command": "ls"}, "result": "ran " + k}},
			map[string]any{"text": "done " + k},
		}}
	}
	b, _ := json.Marshal(map[string]any{"turns": []any{turn("1"), turn("2"), turn("3")}})
	script := write(t, "stream.json", b)
	const session = "44444444-2222-4333-8444-555555555555"
	d := &disk{}
	s := startSender(t, filepath.Join(t.TempDir(), "outbox"), d, base, token)
	pipe := launcher.NewPipeline("", s.box)
	r := launcher.NewRemote(session, launcher.RemoteOptions{Claude: fakeClaude, Dir: project, StopTimeout: time.Second, Logger: discard,
		Env: []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + script}}, pipe, nil)
	defer r.Stop(protocol.StatusCancelled)
	prompt := func(text string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := r.Prompt(ctx, text); err != nil {
			t.Fatal(err)
		}
	}
	turnEnds := func() int {
		n := 0
		for _, l := range storedLines(t, data, session) {
			if strings.Contains(l, `"t":"turn-end"`) {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; relay has %d envelopes", what, len(storedLines(t, data, session)))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	prompt("one")
	waitFor("the first turn", func() bool { return turnEnds() == 1 })
	d.setFull(true)
	prompt("two")
	waitFor("the full disk", func() bool { return d.failed() >= 2 && r.State().Status == launcher.StatusIdle })
	d.setFull(false)
	prompt("three")
	waitFor("three turns", func() bool { return turnEnds() == 3 && r.State().Status == launcher.StatusIdle })
	r.Stop(protocol.StatusCompleted)
	s.stop(t, true)

	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), project)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", claude.TranscriptPath(projectDir, session)).stdout, "\n"), "\n")
	got := storedLines(t, data, session)
	id := func(line string) string {
		var e protocol.Envelope
		json.Unmarshal([]byte(line), &e)
		return e.ID + " " + string(e.Ev.T)
	}
	// The last turn's end comes from Claude's result, which the transcript
	// does not hold: replay leaves that turn open.
	if len(got) != len(want)+1 || !strings.HasSuffix(id(got[len(want)]), " turn-end") {
		for i := range got {
			t.Logf("relay %d: %s", i+1, id(got[i]))
		}
		t.Fatalf("relay stored %d envelopes, replay has %d (+1 turn-end)", len(got), len(want))
	}
	for i := range want {
		if id(got[i]) != id(want[i]) {
			t.Fatalf("envelope %d: relay %s, replay %s", i+1, id(got[i]), id(want[i]))
		}
	}
}
