package scanner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/testutil"
)

func flush(t *testing.T, sc *Scanner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func logTo(b *testutil.SyncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// each reports uuids that were delivered other than once.
func notOnce(t *testing.T, got []string, want ...string) {
	t.Helper()
	count := map[string]int{}
	for _, u := range got {
		count[u]++
	}
	for _, u := range want {
		if count[u] != 1 {
			t.Errorf("%s delivered %d times (all: %v)", u, count[u], got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("delivered %v, want each of %v once", got, want)
	}
}

// Storing fails for a while (the sink refuses, or the state folder cannot
// take the cursor: a file stands where the folder should be, which root
// cannot write through either): Run keeps going, retries with backoff,
// logs once per episode, and once the condition clears every record has
// arrived exactly once and the cursor is saved.
func TestScannerRetriesStoring(t *testing.T) {
	for _, what := range []string{"sink", "cursor folder"} {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(t.TempDir(), "state")
			cursor := filepath.Join(state, "cursor.json")
			main := filepath.Join(dir, "s1.jsonl")
			var logs testutil.SyncBuffer
			h := start(t, dir, Config{CursorFile: cursor, Logger: logTo(&logs)})
			h.sc.AddSession("s1")
			appendTo(t, main, userLine("u1", "a"))
			waitFor(t, "u1", func() bool { return len(h.sink.uuids(false)) == 1 })

			// Break storing.
			aside := state + ".aside"
			if what == "sink" {
				h.sink.setFail(errors.New("outbox: no space left on device"))
			} else {
				if err := os.Rename(state, aside); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(state, []byte("not a folder"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			appendTo(t, main, userLine("u2", "b"))
			waitFor(t, "the failure to be logged", func() bool { return strings.Contains(logs.String(), "cannot store") })
			appendTo(t, main, userLine("u3", "c"))
			if what == "sink" {
				waitFor(t, "two retries", func() bool { return h.sink.failed() >= 3 })
			} else {
				before := logs.String()
				waitFor(t, "u3 delivered while the cursor cannot be saved", func() bool { return len(h.sink.uuids(false)) == 3 })
				_ = before
			}
			select {
			case err := <-h.done:
				t.Fatalf("Run returned while storing failed: %v", err)
			default:
			}

			// Clear it.
			if what == "sink" {
				h.sink.setFail(nil)
			} else {
				os.Remove(state)
				if err := os.Rename(aside, state); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "recovery", func() bool { return strings.Contains(logs.String(), "storing records works again") })
			appendTo(t, main, userLine("u4", "d"))
			waitFor(t, "u4", func() bool { return len(h.sink.uuids(false)) >= 4 })
			h.stop()
			notOnce(t, h.sink.uuids(false), "u1", "u2", "u3", "u4")
			if n := strings.Count(logs.String(), "cannot store"); n != 1 {
				t.Errorf("failure logged %d times:\n%s", n, logs.String())
			}
			if what == "sink" && h.sink.retries == 0 {
				t.Error("the failed batch was not delivered again as a Retry")
			}
			// The cursor is past everything: a restart delivers nothing new.
			h2 := start(t, dir, Config{CursorFile: cursor})
			h2.sc.AddSession("s1")
			waitFor(t, "replay", func() bool { return len(h2.sink.uuids(true)) == 4 })
			h2.stop()
			if got := h2.sink.uuids(false); len(got) != 0 {
				t.Fatalf("delivered again after a restart: %v", got)
			}
		})
	}
}

// The last pass does not wait forever for storing that keeps failing: it
// returns the error after FinalRetryWindow, and the cursor has not moved.
func TestScannerFinalPassGivesUp(t *testing.T) {
	dir := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	h := start(t, dir, Config{CursorFile: cursor})
	h.sc.AddSession("s1")
	<-h.sc.Synced()
	h.sink.setFail(errors.New("outbox broken"))
	appendTo(t, filepath.Join(dir, "s1.jsonl"), userLine("u1", "a"))
	waitFor(t, "a failed delivery", func() bool { return h.sink.failed() >= 1 })
	t0 := time.Now()
	h.cancel()
	err := <-h.done
	h.once.Do(func() {})
	if err == nil || !strings.Contains(err.Error(), "outbox broken") {
		t.Fatalf("Run returned %v", err)
	}
	if d := time.Since(t0); d < FinalRetryWindow-100*time.Millisecond || d > FinalRetryWindow+2*time.Second {
		t.Fatalf("the last pass gave up after %v, want about %v", d, FinalRetryWindow)
	}
	c, _ := LoadCursor(cursor)
	if pos := c.Files[filepath.Join(dir, "s1.jsonl")]; pos.Offset != 0 {
		t.Fatalf("cursor moved to %+v", pos)
	}
}

// A transcript replaced while ccrelay was down, with records inserted
// before the old offset, is noticed by its identity (or by the bytes
// before the offset when rewritten in place) and read again: the inserted
// records are delivered as new, not taken for replayed history.
func TestScannerReplacedWhileDown(t *testing.T) {
	for _, how := range []string{"renamed over", "rewritten in place"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			cursor := filepath.Join(t.TempDir(), "cursor.json")
			main := filepath.Join(dir, "s1.jsonl")
			appendTo(t, main, userLine("u1", "a")+userLine("u2", "b"))
			h := start(t, dir, Config{CursorFile: cursor})
			h.sc.AddSession("s1")
			waitFor(t, "first", func() bool { return len(h.sink.uuids(false)) == 2 })
			h.stop()

			content := userLine("u0", "x") + userLine("u1", "a") + userLine("ins", "y") + userLine("u2", "b")
			if how == "renamed over" {
				tmp := main + ".tmp"
				os.WriteFile(tmp, []byte(content), 0o644)
				if err := os.Rename(tmp, main); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(main, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			h2 := start(t, dir, Config{CursorFile: cursor})
			h2.sc.AddSession("s1")
			waitFor(t, "inserted records", func() bool { return len(h2.sink.uuids(false)) == 4 })
			if got := strings.Join(h2.sink.uuids(false), ","); got != "u0,u1,ins,u2" {
				t.Fatalf("delivered as new: %s", got)
			}
			if got := h2.sink.uuids(true); len(got) != 0 {
				t.Fatalf("taken for replayed history: %v", got)
			}
		})
	}
}

// At the last pass a last line without a newline is delivered when it is a
// record (replay maps it too), and the cursor moves past it; a torn one is
// not.
func TestScannerFinalLineWithoutNewline(t *testing.T) {
	dir := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	main := filepath.Join(dir, "s1.jsonl")
	appendTo(t, main, userLine("u1", "a")+strings.TrimSuffix(userLine("u2", "b"), "\n"))
	sub := filepath.Join(dir, "s1", "subagents", "agent-a.jsonl")
	os.MkdirAll(filepath.Dir(sub), 0o755)
	appendTo(t, sub, userLine("s1", "c")+`{"type":"user","uuid":"torn","mess`)
	var logs testutil.SyncBuffer
	h := start(t, dir, Config{CursorFile: cursor, Logger: logTo(&logs)})
	h.sc.AddSession("s1")
	waitFor(t, "complete lines", func() bool { return len(h.sink.uuids(false)) == 2 })
	h.stop()
	notOnce(t, h.sink.uuids(false), "u1", "s1", "u2")
	if !strings.Contains(logs.String(), "the last line has no end") {
		t.Errorf("the torn line was not logged:\n%s", logs.String())
	}
	h2 := start(t, dir, Config{CursorFile: cursor})
	h2.sc.AddSession("s1")
	waitFor(t, "replay", func() bool { return len(h2.sink.uuids(true)) == 3 })
	h2.stop()
	if got := h2.sink.uuids(false); len(got) != 0 {
		t.Fatalf("delivered again after a restart: %v", got)
	}
}

// A subagents/ folder that cannot be listed is logged once; its records
// come once it can be listed again.
func TestScannerUnlistableSubagents(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "s1", "subagents", "agent-a.jsonl")
	os.MkdirAll(filepath.Dir(sub), 0o755)
	appendTo(t, filepath.Join(dir, "s1.jsonl"), userLine("u1", "a"))
	appendTo(t, sub, userLine("sub1", "b"))
	var broken atomic.Bool
	broken.Store(true)
	var logs testutil.SyncBuffer
	h := startWith(t, dir, Config{Logger: logTo(&logs)}, func(s *Scanner) {
		s.listSubagents = func(main string) ([]string, error) {
			if broken.Load() {
				return nil, fmt.Errorf("list subagent transcripts: open %s: %w", filepath.Dir(sub), os.ErrPermission)
			}
			return claude.SubagentFiles(main)
		}
	})
	h.sc.AddSession("s1")
	waitFor(t, "u1", func() bool { return len(h.sink.uuids(false)) == 1 })
	for range 3 {
		<-h.sc.Synced()
	}
	if n := strings.Count(logs.String(), "cannot list the session's subagent transcripts"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
	broken.Store(false)
	waitFor(t, "the subagent's record", func() bool { return len(h.sink.uuids(false)) == 2 })
	if !strings.Contains(logs.String(), "can be listed again") {
		t.Fatalf("recovery not logged:\n%s", logs.String())
	}
}

// A long backlog goes to the sink in batches of at most MaxBatchRecords
// records and MaxBatchBytes bytes, in order, each record once.
func TestScannerBoundedBatches(t *testing.T) {
	tests := []struct {
		name    string
		n, size int
	}{
		{"many small records", 2*MaxBatchRecords + 10, 10},
		{"large records", 1000, 10 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var b strings.Builder
			var want []string
			for i := range tt.n {
				u := fmt.Sprintf("u%d", i)
				want = append(want, u)
				b.WriteString(userLine(u, strings.Repeat("x", tt.size)))
			}
			appendTo(t, filepath.Join(dir, "s1.jsonl"), b.String())
			h := start(t, dir, Config{})
			h.sc.AddSession("s1")
			waitFor(t, "all", func() bool { return len(h.sink.uuids(false)) == tt.n })
			h.stop()
			if got := strings.Join(h.sink.uuids(false), ","); got != strings.Join(want, ",") {
				t.Fatal("records out of order or repeated")
			}
			if len(h.sink.sizes) < 2 {
				t.Fatalf("one batch of %d records", h.sink.sizes[0])
			}
			for i, n := range h.sink.sizes {
				if n > MaxBatchRecords || (n > 1 && h.sink.bytes[i] > MaxBatchBytes+int64(tt.size)+200) {
					t.Fatalf("batch %d: %d records, %d bytes", i, n, h.sink.bytes[i])
				}
			}
		})
	}
}

// Delivered records do not stay reachable through the pending slice's
// backing array.
func TestPopReleasesRecords(t *testing.T) {
	ss := &session{}
	f := &file{}
	for i := range 4 {
		f.pending = append(f.pending, pendingRecord{rec: Record{Record: &claude.Record{UUID: fmt.Sprint(i)}}, size: 1})
		ss.pendingRecords++
		ss.pendingBytes++
	}
	backing := f.pending[:4:4]
	f.pop(ss, 3)
	for i := range 3 {
		if backing[i].rec.Record != nil {
			t.Fatalf("delivered record %d is still referenced", i)
		}
	}
	if len(f.pending) != 1 || ss.pendingRecords != 1 || ss.pendingBytes != 1 {
		t.Fatalf("pending %d, accounted %d records %d bytes", len(f.pending), ss.pendingRecords, ss.pendingBytes)
	}
	f.pop(ss, 1)
	if f.pending != nil {
		t.Fatal("an empty pending slice keeps its array")
	}
}

// earlierSessions writes a cursor that knows n earlier sessions of dir;
// with keep their transcripts exist (1 record each), else they were
// deleted.
func earlierSessions(t testing.TB, dir, cursor string, n int, keep bool) {
	t.Helper()
	c := Cursor{Files: map[string]Position{}, Mains: map[string]string{}}
	for i := range n {
		id := fmt.Sprintf("old-%03d", i)
		p := claude.TranscriptPath(dir, id)
		line := userLine("old-u-"+id, "old")
		if keep {
			appendTo(t, p, line)
		}
		c.Sessions = append(c.Sessions, id)
		c.Files[p] = Position{Offset: int64(len(line)), Line: 1}
		c.Files[filepath.Join(dir, id, "subagents", "agent-x.jsonl")] = Position{Offset: 10, Line: 1}
	}
	if err := c.Save(cursor); err != nil {
		t.Fatal(err)
	}
}

// A cursor with 300 earlier sessions: none is followed (their transcripts
// growing delivers nothing), deleted ones cost no warning, and the cursor
// keeps at most MaxCursorSessions sessions.
func TestScannerFollowsOnlyAnnouncedSessions(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("transcripts_exist=%v", keep), func(t *testing.T) {
			dir := t.TempDir()
			cursor := filepath.Join(t.TempDir(), "cursor.json")
			earlierSessions(t, dir, cursor, 300, keep)
			var logs testutil.SyncBuffer
			h := start(t, dir, Config{CursorFile: cursor, Logger: logTo(&logs)})
			h.sc.AddSession("new")
			appendTo(t, filepath.Join(dir, "new.jsonl"), userLine("n1", "a"))
			if keep {
				appendTo(t, claude.TranscriptPath(dir, "old-299"), userLine("old-late", "b"))
			}
			waitFor(t, "n1", func() bool { return len(h.sink.uuids(false)) == 1 })
			for range 3 {
				<-h.sc.Synced()
			}
			h.stop()
			if got := strings.Join(h.sink.uuids(false), ","); got != "n1" {
				t.Fatalf("delivered %s", got)
			}
			if strings.Contains(logs.String(), "level=WARN") {
				t.Fatalf("warnings:\n%s", logs.String())
			}
			c, err := LoadCursor(cursor)
			if err != nil {
				t.Fatal(err)
			}
			wantSessions := 1
			if keep {
				wantSessions = MaxCursorSessions
			}
			if len(c.Sessions) != wantSessions || c.Sessions[len(c.Sessions)-1] != "new" {
				t.Fatalf("cursor keeps %d sessions (last %q), want %d", len(c.Sessions), c.Sessions[len(c.Sessions)-1], wantSessions)
			}
			for p := range c.Files {
				id := strings.TrimSuffix(filepath.Base(p), ".jsonl")
				if strings.HasPrefix(id, "old-") && !keep {
					t.Fatalf("a deleted session's file is kept: %s", p)
				}
			}
			if keep && len(c.Files) != 2*(MaxCursorSessions-1)+1 {
				t.Fatalf("cursor keeps %d files", len(c.Files))
			}
		})
	}
}

// The hook's transcript path is where Claude writes: a working directory
// reached through a symlink has its transcripts under the resolved path,
// not under the one ccrelay was started in. That file and its subagents are
// followed; a path that is not a transcript of the projects folder is not.
func TestScannerTranscriptPathThroughSymlink(t *testing.T) {
	root := t.TempDir()
	config := filepath.Join(root, "claude")
	real := filepath.Join(root, "disk", "code")
	link := filepath.Join(root, "code")
	os.MkdirAll(real, 0o755)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	resolved, _ := filepath.EvalSymlinks(link)
	seenDir, _ := claude.ProjectDir(config, link)      // where ccrelay looks
	writeDir, _ := claude.ProjectDir(config, resolved) // where Claude writes
	if seenDir == writeDir {
		t.Fatal("the symlink did not change the project folder")
	}
	main := claude.TranscriptPath(writeDir, "s1")
	sub := filepath.Join(claude.SubagentDir(writeDir, "s1"), "agent-a.jsonl")
	os.MkdirAll(filepath.Dir(sub), 0o755)
	appendTo(t, main, userLine("u1", "a"))
	appendTo(t, sub, userLine("sub1", "b"))

	var logs testutil.SyncBuffer
	h := start(t, seenDir, Config{Logger: logTo(&logs)})
	h.sc.AddSessionPath("s1", main)
	waitFor(t, "both files", func() bool { return len(h.sink.uuids(false)) == 2 })
	appendTo(t, main, userLine("u2", "c"))
	waitFor(t, "an append", func() bool { return len(h.sink.uuids(false)) == 3 })

	for _, bad := range []string{"/etc/passwd", filepath.Join(writeDir, "other.jsonl"), "relative/s2.jsonl",
		filepath.Join(root, "elsewhere", "x", "s2.jsonl")} {
		h.sc.AddSessionPath("s2", bad)
	}
	waitFor(t, "warnings", func() bool { return strings.Count(logs.String(), "ignored a transcript path") == 4 })
}

// When inotify's watch limit is reached, the scanner polls every
// FallbackPollInterval (here instead of an hour), says what happened and
// how to raise the limit (in the log, and once to the user), and watches
// again once it can (and says so once).
func TestScannerWatchLimit(t *testing.T) {
	dir := t.TempDir()
	var limit atomic.Bool
	limit.Store(true)
	var logs, notices testutil.SyncBuffer
	h := startWith(t, dir, Config{PollInterval: time.Hour, Logger: logTo(&logs), Notice: &notices}, func(s *Scanner) {
		s.retryMin, s.retryMax = 100*time.Millisecond, 100*time.Millisecond
		s.watchAdd = func(d string) error {
			if limit.Load() {
				return fmt.Errorf("add watch %s: %w", d, syscall.ENOSPC)
			}
			return s.watcher.Add(d)
		}
	})
	h.sc.AddSession("s1")
	flush(t, h.sc) // the announcing pass is over: only a poll can read u1
	appendTo(t, filepath.Join(dir, "s1.jsonl"), userLine("u1", "a"))
	waitFor(t, "u1 by the fallback poll", func() bool { return len(h.sink.uuids(false)) == 1 })
	out := logs.String()
	if !strings.Contains(out, "inotify watch limit was reached") || !strings.Contains(out, "fs.inotify.max_user_watches") ||
		strings.Contains(out, "no space left") {
		t.Fatalf("log does not say what happened:\n%s", out)
	}
	limit.Store(false)
	waitFor(t, "watches again", func() bool { return strings.Contains(logs.String(), "file watching works again") })
	appendTo(t, filepath.Join(dir, "s1.jsonl"), userLine("u2", "b"))
	waitFor(t, "u2 by a watch event", func() bool { return len(h.sink.uuids(false)) == 2 })
	if n := strings.Count(logs.String(), "inotify watch limit was reached"); n != 1 {
		t.Fatalf("limit logged %d times", n)
	}
	if got := notices.String(); strings.Count(got, "\n") != 2 || strings.Count(got, "inotify watch limit was reached") != 1 ||
		!strings.Contains(got, "fs.inotify.max_user_watches") || strings.Count(got, "for changes again") != 1 {
		t.Fatalf("the user heard:\n%s", got)
	}
}

// The first session in a new project folder is seen at once: the folder's
// parent is watched until it exists (the poll here is an hour).
func TestScannerNewProjectFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "projects", "-new-project")
	os.MkdirAll(filepath.Dir(dir), 0o755)
	h := start(t, dir, Config{PollInterval: time.Hour})
	h.sc.AddSession("s1")
	flush(t, h.sc)
	os.MkdirAll(dir, 0o755)
	appendTo(t, filepath.Join(dir, "s1.jsonl"), userLine("u1", "a"))
	waitFor(t, "the first record", func() bool { return len(h.sink.uuids(false)) == 1 })
	sub := filepath.Join(dir, "s1", "subagents", "agent-a.jsonl")
	os.MkdirAll(filepath.Dir(sub), 0o755)
	appendTo(t, sub, userLine("sub1", "b"))
	waitFor(t, "the subagent's first record", func() bool { return len(h.sink.uuids(false)) == 2 })
}

// Flush delivers at once what is on disk, even a recent record that would
// wait for order across files, without waiting for the poll.
func TestScannerFlush(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "s1.jsonl")
	sub := filepath.Join(dir, "s1", "subagents", "agent-a.jsonl")
	os.MkdirAll(filepath.Dir(sub), 0o755)
	appendTo(t, sub, tsLine("s0", time.Now().UTC().Format(time.RFC3339Nano)))
	h := start(t, dir, Config{PollInterval: time.Hour, NoWatch: true, OrderWindow: time.Hour})
	h.sc.AddSession("s1")
	appendTo(t, main, tsLine("m1", time.Now().Add(time.Millisecond).UTC().Format(time.RFC3339Nano)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.sc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.sink.uuids(false), ","); got != "s0,m1" {
		t.Fatalf("after Flush: %q", got)
	}
	h.stop()
	if err := h.sc.Flush(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Flush after stop: %v", err)
	}
}
