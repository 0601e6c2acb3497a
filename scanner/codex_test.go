package scanner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const codexThread = "01a21daf-e89b-7892-97c7-2fee8a1b050d"

// codexSink records what a CodexFollower delivers; fail makes the next
// deliveries fail.
type codexSink struct {
	mu    sync.Mutex
	lines []CodexLine
	tries []CodexBatch
	fail  int
	got   chan struct{}
}

func newCodexSink() *codexSink { return &codexSink{got: make(chan struct{}, 1)} }

func (s *codexSink) DeliverCodex(_ context.Context, b CodexBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries = append(s.tries, b)
	if s.fail > 0 {
		s.fail--
		return errors.New("disk full")
	}
	s.lines = append(s.lines, b.Lines...)
	select {
	case s.got <- struct{}{}:
	default:
	}
	return nil
}

func (s *codexSink) snapshot() []CodexLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CodexLine(nil), s.lines...)
}

// waitLines waits until the sink holds n lines (or fails the test).
func (s *codexSink) waitLines(t *testing.T, n int) []CodexLine {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if got := s.snapshot(); len(got) >= n {
			return got
		}
		select {
		case <-s.got:
		case <-deadline:
			t.Fatalf("waited for %d lines, have %d", n, len(s.snapshot()))
		}
	}
}

func rolloutLine(ordinal int, typ string) string {
	return fmt.Sprintf(`{"timestamp":"2026-11-27T15:46:37.%03dZ","ordinal":%d,"type":%q,"payload":{}}`+"\n", ordinal%1000, ordinal, typ)
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func rolloutPath(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "sessions", "2026", "11", "27")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "rollout-2026-11-27T15-46-37-"+codexThread+".jsonl")
}

// runFollower runs a follower until the returned stop is called; stop
// returns Run's result.
func runFollower(t *testing.T, cfg CodexConfig, sink CodexSink, path string) (*CodexFollower, func() error) {
	t.Helper()
	f := NewCodexFollower(cfg, sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	f.Follow(path)
	stopped := false
	var err error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return f, stop
}

func ordinals(ls []CodexLine) []int64 {
	var o []int64
	for _, l := range ls {
		o = append(o, l.Ordinal)
	}
	return o
}

func TestCodexThreadOf(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"rollout-2026-11-27T15-46-37-" + codexThread + ".jsonl", codexThread, true},
		{"/a/b/rollout-x-" + codexThread + ".jsonl", codexThread, true},
		{codexThread + ".jsonl", "", false},
		{"rollout-2026-11-27T15-46-37-" + codexThread + ".json", "", false},
		{"rollout-2026-11-27T15-46-37-01A21DAF-E89B-7892-97C7-2FEE8A1B050D.jsonl", codexThread, true},
	} {
		got, ok := CodexThreadOf(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("CodexThreadOf(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// Lines appended while the follower watches arrive, in order, each once,
// with the thread id and the file; the fsnotify watch brings them long
// before the poll interval.
func TestCodexFollowAppendWhileWatching(t *testing.T) {
	path := rolloutPath(t)
	appendFile(t, path, rolloutLine(0, "session_meta")+rolloutLine(1, "event_msg"))
	sink := newCodexSink()
	_, stop := runFollower(t, CodexConfig{PollInterval: time.Hour}, sink, path)
	sink.waitLines(t, 2)
	for i := 2; i < 6; i++ {
		appendFile(t, path, rolloutLine(i, "response_item"))
		sink.waitLines(t, i+1)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := sink.snapshot()
	if fmt.Sprint(ordinals(got)) != "[0 1 2 3 4 5]" {
		t.Fatalf("ordinals %v", ordinals(got))
	}
	for _, l := range got {
		if l.Thread != codexThread || l.File != path || l.Replayed {
			t.Fatalf("line %+v", l)
		}
	}
	if got[5].Record == nil || got[5].Type != "response_item" || got[5].Timestamp == 0 || got[0].Type != "session_meta" {
		t.Fatalf("records %+v %+v", got[0].Record, got[5].Record)
	}
}

// A last line without its newline waits for it; once the newline comes the
// whole line is delivered once. A torn last line when the follower stops
// is read if it is a whole record, skipped if not.
func TestCodexFollowTornLine(t *testing.T) {
	path := rolloutPath(t)
	whole := rolloutLine(1, "event_msg")
	appendFile(t, path, rolloutLine(0, "session_meta")+whole[:20])
	sink := newCodexSink()
	f, stop := runFollower(t, CodexConfig{PollInterval: 20 * time.Millisecond, NoWatch: true}, sink, path)
	sink.waitLines(t, 1)
	for range 3 { // passes over the torn line deliver nothing of it
		if err := f.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := sink.snapshot(); len(got) != 1 {
		t.Fatalf("a torn line was delivered: %v", ordinals(got))
	}
	appendFile(t, path, whole[20:])
	got := sink.waitLines(t, 2)
	if got[1].Type != "event_msg" || !got[1].HasOrdinal || got[1].Record.Ordinal != 1 {
		t.Fatalf("line %+v", got[1].Record)
	}
	// Stopping with a whole record without its newline, then a torn one.
	last := rolloutLine(2, "event_msg")
	appendFile(t, path, last[:len(last)-1])
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sink.snapshot(); len(got) != 2 {
		t.Fatalf("delivered before its newline: %v", ordinals(got))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := sink.snapshot(); fmt.Sprint(ordinals(got)) != "[0 1 2]" {
		t.Fatalf("at the end: %v", ordinals(got))
	}

	path2 := filepath.Join(filepath.Dir(path), "rollout-2026-11-27T15-50-00-01a21daf-e89b-7892-97c7-2fee8a1b0000.jsonl")
	appendFile(t, path2, rolloutLine(0, "session_meta")+rolloutLine(1, "event_msg")[:30])
	sink2 := newCodexSink()
	_, stop2 := runFollower(t, CodexConfig{PollInterval: 20 * time.Millisecond, NoWatch: true}, sink2, path2)
	sink2.waitLines(t, 1)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if got := sink2.snapshot(); fmt.Sprint(ordinals(got)) != "[0]" {
		t.Fatalf("a torn record at the end was delivered: %v", ordinals(got))
	}
}

// After a restart the lines delivered before come again marked Replayed
// (for the consumer's state), the new ones not; a failed delivery is
// retried with the same lines, and the cursor does not move past them.
func TestCodexFollowRestartFromCursor(t *testing.T) {
	path := rolloutPath(t)
	cursor := filepath.Join(t.TempDir(), "codex-cursor.json")
	appendFile(t, path, rolloutLine(0, "session_meta")+rolloutLine(1, "event_msg")+rolloutLine(2, "event_msg"))
	sink := newCodexSink()
	_, stop := runFollower(t, CodexConfig{CursorFile: cursor, PollInterval: 20 * time.Millisecond}, sink, path)
	sink.waitLines(t, 3)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCodexCursor(cursor)
	if err != nil || c.Ordinals[codexThread] != 2 || c.Files[codexThread] != path {
		t.Fatalf("cursor %+v, %v", c, err)
	}

	appendFile(t, path, rolloutLine(3, "event_msg")+rolloutLine(4, "event_msg"))
	sink2 := newCodexSink()
	sink2.fail = 1
	_, stop2 := runFollower(t, CodexConfig{CursorFile: cursor, PollInterval: 20 * time.Millisecond}, sink2, path)
	got := sink2.waitLines(t, 5)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ordinals(got)) != "[0 1 2 3 4]" {
		t.Fatalf("ordinals %v", ordinals(got))
	}
	for _, l := range got {
		if l.Replayed != (l.Ordinal <= 2) {
			t.Fatalf("line %d Replayed=%v", l.Ordinal, l.Replayed)
		}
	}
	sink2.mu.Lock()
	tries := sink2.tries
	sink2.mu.Unlock()
	if len(tries) < 2 || tries[0].Retry || !tries[1].Retry || fmt.Sprint(ordinals(tries[0].Lines)) != fmt.Sprint(ordinals(tries[1].Lines)) {
		t.Fatalf("the failed batch was not delivered again as it was: %+v", tries)
	}
	if c, _ := LoadCodexCursor(cursor); c.Ordinals[codexThread] != 4 {
		t.Fatalf("cursor %+v", c)
	}
}

// A resume of the thread appends to the same file with the ordinals going
// on: only the appended lines are new, during a run and across a restart;
// a file rewritten from the start (the same lines again) brings nothing
// twice.
func TestCodexFollowResumeAppends(t *testing.T) {
	path := rolloutPath(t)
	cursor := filepath.Join(t.TempDir(), "codex-cursor.json")
	first := ""
	for i := range 14 {
		first += rolloutLine(i, "event_msg")
	}
	appendFile(t, path, first)
	sink := newCodexSink()
	_, stop := runFollower(t, CodexConfig{CursorFile: cursor, PollInterval: 20 * time.Millisecond}, sink, path)
	sink.waitLines(t, 14)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	resumed := ""
	for i := 14; i < 24; i++ {
		resumed += rolloutLine(i, "event_msg")
	}
	appendFile(t, path, resumed)
	sink2 := newCodexSink()
	f2, stop2 := runFollower(t, CodexConfig{CursorFile: cursor, PollInterval: 20 * time.Millisecond}, sink2, path)
	got := sink2.waitLines(t, 24)
	// The same lines again in a new file under the same name: nothing new.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(first+resumed), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if err := f2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	got = sink2.snapshot()
	var fresh []int64
	for _, l := range got {
		if !l.Replayed {
			fresh = append(fresh, l.Ordinal)
		}
	}
	if len(got) != 24 || fmt.Sprint(fresh) != "[14 15 16 17 18 19 20 21 22 23]" {
		t.Fatalf("delivered %v, new %v", ordinals(got), fresh)
	}
}

// The cursor keeps the threads followed last, at most MaxCursorSessions.
func TestCodexCursorBound(t *testing.T) {
	c, _ := LoadCodexCursor("")
	for i := range MaxCursorSessions + 5 {
		id := fmt.Sprintf("t%d", i)
		c.touch(id, id+".jsonl")
		c.Ordinals[id] = int64(i)
	}
	if len(c.Threads) != MaxCursorSessions || len(c.Ordinals) != MaxCursorSessions || len(c.Files) != MaxCursorSessions || c.Threads[0] != "t5" {
		t.Fatalf("kept %d threads (%d ordinals), first %s", len(c.Threads), len(c.Ordinals), c.Threads[0])
	}
}
