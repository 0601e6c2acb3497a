package scanner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ccrelay/ccrelay/codex"
)

// A Codex rollout is one JSONL file per thread
// (CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl), each
// line {"timestamp", "ordinal", "type", "payload"}, written as the thread
// goes and appended to by a resume of the thread. CodexFollower follows
// such files as Scanner follows Claude's transcripts: incremental reads by
// byte offset, a last line without its newline left for later, and a
// durable cursor. Its dedupe key is (thread id, ordinal): ordinals count
// the file's lines from 0 and go on counting across resumes.

// CodexLine is one line of a Codex rollout.
type CodexLine struct {
	*codex.Record
	Thread  string // the thread id (the file's)
	Ordinal int64  // the record's, or its line number from 0 when it has none
	File    string
	// Replayed marks a line delivered before a restart (at or before the
	// durable cursor): consumers rebuild their state from it and need not
	// send its output again.
	Replayed bool

	ts  int64  // the record's time, or the time of the line before it
	seq uint64 // the read that got it (CodexFollower.reads)
}

// CodexBatch is a run of lines of one thread, in file order.
type CodexBatch struct {
	Thread string
	Lines  []CodexLine
	// Parent is the root thread whose session this thread's lines are
	// part of (a subagent's thread; see adoptChildren), "" for a root.
	Parent string
	// Retry marks a batch whose delivery failed before: exactly the same
	// lines again.
	Retry bool
}

// CodexSink receives batches in order; once DeliverCodex returns nil their
// output is durable and the cursor moves past them. After an error (ErrHold
// included) the same batch is delivered again, with backoff.
type CodexSink interface {
	DeliverCodex(ctx context.Context, b CodexBatch) error
}

// CodexConfig configures a CodexFollower.
type CodexConfig struct {
	// CursorFile persists the cursor; "" keeps it in memory only.
	CursorFile   string
	PollInterval time.Duration // default DefaultPollInterval
	NoWatch      bool          // polling only
	MaxLine      int           // default DefaultMaxLine
	Logger       *slog.Logger
}

// CodexCursor is the durable state of a CodexFollower: per thread, the
// highest ordinal whose output is durable, for the MaxCursorSessions
// threads followed last.
type CodexCursor struct {
	Version  int               `json:"version"`
	Threads  []string          `json:"threads"` // least recently followed first
	Ordinals map[string]int64  `json:"ordinals"`
	Files    map[string]string `json:"files,omitempty"`
}

const codexCursorVersion = 1

// LoadCodexCursor reads a cursor file; a missing file is an empty cursor,
// a damaged one too (with the error, to be logged).
func LoadCodexCursor(path string) (CodexCursor, error) {
	empty := CodexCursor{Version: codexCursorVersion, Ordinals: map[string]int64{}, Files: map[string]string{}}
	if path == "" {
		return empty, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return empty, fmt.Errorf("read cursor %s: %w", path, err)
	}
	c := empty
	if err := json.Unmarshal(data, &c); err != nil {
		return empty, fmt.Errorf("cursor %s is damaged (%v); reading every rollout from the beginning", path, err)
	}
	if c.Ordinals == nil {
		c.Ordinals = map[string]int64{}
	}
	if c.Files == nil {
		c.Files = map[string]string{}
	}
	return c, nil
}

// Save writes the cursor atomically and durably.
func (c CodexCursor) Save(path string) error {
	if path == "" {
		return nil
	}
	c.Version = codexCursorVersion
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return writeAtomic(path, data)
}

// touch makes thread the most recently followed, in file, and keeps
// MaxCursorSessions threads.
func (c *CodexCursor) touch(thread, file string) {
	c.Threads = append(slices.DeleteFunc(c.Threads, func(s string) bool { return s == thread }), thread)
	c.Files[thread] = file
	if n := len(c.Threads); n > MaxCursorSessions {
		for _, old := range c.Threads[:n-MaxCursorSessions] {
			delete(c.Ordinals, old)
			delete(c.Files, old)
		}
		c.Threads = slices.Clone(c.Threads[n-MaxCursorSessions:])
	}
}

// CodexThreadOf returns the thread id a rollout file's name carries.
func CodexThreadOf(path string) (string, bool) { return codex.ThreadID(path) }

// CodexFollower follows Codex rollout files. Run owns its only goroutine;
// Follow and Flush may be called from any goroutine.
type CodexFollower struct {
	cfg  CodexConfig
	sink CodexSink
	log  *slog.Logger

	follow  chan string
	flushes chan chan error
	synced  chan struct{}
	done    chan struct{}

	cursor  CodexCursor
	dirty   bool
	files   []*codexFile
	watcher *fsnotify.Watcher
	watched map[string]bool
	final   bool
	backoff time.Duration
	metas   map[string]groupMeta // rollouts judged for subagents, by path
	reads   uint64               // reads made, to order them
}

type codexFile struct {
	thread   string
	path     string
	tail     *Tail
	replayTo int64 // lines up to this ordinal were delivered before a restart
	seen     int64 // highest ordinal queued (-1: none)
	pending  []CodexLine
	retry    bool
	errLog   bool // a read error was logged (once until it reads again)
	oddLog   bool // a line with an ordinal out of bounds was logged (once)
	// root is the root thread of the group this subagent's thread is
	// followed with ("" for a root).
	root      string
	delivered bool   // a batch of it was delivered
	sending   int    // the lines of pending a failed delivery held
	lastTS    int64  // the time of the last line read
	lastRead  uint64 // the last read of it (CodexFollower.reads)
}

// NewCodexFollower returns a follower that follows no file until told to.
func NewCodexFollower(cfg CodexConfig, sink CodexSink) *CodexFollower {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = DefaultMaxLine
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &CodexFollower{cfg: cfg, sink: sink, log: cfg.Logger, follow: make(chan string, 16),
		flushes: make(chan chan error), synced: make(chan struct{}, 1), done: make(chan struct{}), watched: map[string]bool{}}
	c, err := LoadCodexCursor(cfg.CursorFile)
	if err != nil {
		f.log.Warn("codex cursor", "err", err)
	}
	f.cursor = c
	return f
}

// Follow announces a rollout file (whose name carries its thread id). A
// thread followed before goes on where its cursor stands; the same thread
// in another file follows that file.
func (f *CodexFollower) Follow(path string) {
	select {
	case f.follow <- path:
	case <-f.done:
	}
}

// Synced returns a channel that receives a token after each successful
// pass.
func (f *CodexFollower) Synced() <-chan struct{} { return f.synced }

// Flush makes a pass at once and returns when what it read is delivered.
func (f *CodexFollower) Flush(ctx context.Context) error {
	w := make(chan error, 1)
	select {
	case f.flushes <- w:
	case <-f.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *CodexFollower) add(path string) {
	thread, ok := CodexThreadOf(path)
	if !ok {
		f.log.Warn("not a Codex rollout file (rollout-…-<thread id>.jsonl); not followed", "path", path)
		return
	}
	f.cursor.touch(thread, path)
	f.dirty = true
	for _, cf := range f.files {
		if cf.thread == thread {
			if cf.path != path {
				f.log.Info("following the thread in another rollout file", "thread", thread, "file", path)
				cf.path, cf.tail = path, NewTail(path, Position{})
				cf.tail.MaxLine = f.cfg.MaxLine
			}
			return
		}
	}
	replayTo := int64(-1)
	if o, ok := f.cursor.Ordinals[thread]; ok {
		replayTo = o
	}
	t := NewTail(path, Position{})
	t.MaxLine = f.cfg.MaxLine
	f.files = append(f.files, &codexFile{thread: thread, path: path, tail: t, replayTo: replayTo, seen: -1})
	f.watch(filepath.Dir(path))
}

func (f *CodexFollower) watch(dir string) {
	if f.watcher == nil || f.watched[dir] {
		return
	}
	if err := f.watcher.Add(dir); err != nil {
		f.log.Warn("cannot watch the rollout folder; checking it every poll interval", "dir", dir, "err", err)
	}
	f.watched[dir] = true
}

// Run follows until ctx is done, then makes a last pass in which a last
// line without its newline is read too. A failing sink or cursor save is
// retried with backoff; the last pass gives up after FinalRetryWindow and
// returns the error.
func (f *CodexFollower) Run(ctx context.Context) error {
	defer close(f.done)
	interval := f.cfg.PollInterval
	if !f.cfg.NoWatch {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			f.log.Warn("cannot watch Codex's rollouts; polling", "every", FallbackPollInterval, "err", err)
			interval = min(interval, FallbackPollInterval)
		} else {
			f.watcher = w
			defer w.Close()
		}
	}
	var events <-chan fsnotify.Event
	var werrs <-chan error
	if f.watcher != nil {
		events, werrs = f.watcher.Events, f.watcher.Errors
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var waiting []chan error
	for {
		err := f.pass(ctx)
		if err == nil {
			for _, w := range waiting {
				w <- nil
			}
			waiting = nil
			f.backoff = 0
			select {
			case f.synced <- struct{}{}:
			default:
			}
		} else {
			f.backoff = min(max(2*f.backoff, RetryMin), RetryMax)
		}
		var wait <-chan time.Time
		if err != nil {
			wait = time.After(f.backoff)
		}
		for woken := false; !woken; {
			select {
			case <-ctx.Done():
				err := f.finish(ctx)
				for _, w := range waiting {
					w <- err
				}
				return err
			case <-wait:
				woken = true
			case p := <-f.follow:
				f.add(p)
				woken = err == nil
			case w := <-f.flushes:
				waiting = append(waiting, w)
				woken = err == nil
			case <-events:
				woken = err == nil
			case werr := <-werrs:
				f.log.Warn("file watch error; checking now", "err", werr)
				woken = err == nil
			case <-tick.C:
				woken = err == nil
			}
		}
		for drained := false; !drained; {
			select {
			case p := <-f.follow:
				f.add(p)
			case w := <-f.flushes:
				waiting = append(waiting, w)
			case <-events:
			default:
				drained = true
			}
		}
	}
}

// finish is the last pass, retried for FinalRetryWindow while storing
// fails.
func (f *CodexFollower) finish(ctx context.Context) error {
	for drained := false; !drained; {
		select {
		case p := <-f.follow:
			f.add(p)
		default:
			drained = true
		}
	}
	f.final = true
	bg := context.WithoutCancel(ctx)
	deadline := time.Now().Add(FinalRetryWindow)
	wait := RetryMin
	for {
		err := f.pass(bg)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait) // bounded by FinalRetryWindow; nothing else to wait for
		wait = min(2*wait, RetryMax)
	}
}

// pass reads what is new in every followed file and delivers it.
func (f *CodexFollower) pass(ctx context.Context) error {
	var firstErr error
	for _, cf := range f.files {
		if len(cf.pending) == 0 {
			f.read(cf)
		}
	}
	f.adoptChildren()
	for _, g := range f.groups() {
		if err := f.passGroup(ctx, g); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if f.dirty {
		if err := f.cursor.Save(f.cfg.CursorFile); err != nil {
			f.log.Warn("could not save the codex cursor; retrying", "err", err)
			if firstErr == nil {
				firstErr = err
			}
		} else {
			f.dirty = false
		}
	}
	return firstErr
}

// deliver delivers the first n lines cf holds (read in batches of at most
// MaxBatchRecords lines or MaxBatchBytes); after a failure the same lines
// are delivered again, marked Retry.
func (f *CodexFollower) deliver(ctx context.Context, cf *codexFile, n int) error {
	b := CodexBatch{Thread: cf.thread, Parent: cf.root, Lines: cf.pending[:n:n], Retry: cf.retry}
	if err := f.sink.DeliverCodex(ctx, b); err != nil {
		cf.retry, cf.sending = true, n
		if !errors.Is(err, ErrHold) {
			f.log.Warn("could not deliver a rollout's lines; retrying", "thread", cf.thread, "err", err)
		}
		return fmt.Errorf("deliver rollout lines of thread %s: %w", cf.thread, err)
	}
	cf.delivered = true
	last := cf.pending[n-1].Ordinal
	if o, ok := f.cursor.Ordinals[cf.thread]; !ok || last > o {
		f.cursor.Ordinals[cf.thread] = last
		f.dirty = true
	}
	cf.pending, cf.retry, cf.sending = cf.pending[n:], false, 0
	if len(cf.pending) == 0 {
		cf.pending = nil
	}
	return nil
}

// MaxCodexOrdinalGap bounds how far a rollout line's ordinal may run
// ahead of the lines before it (codex.MaxOrdinalGap): a line past it is
// skipped with a log. Taken as read, it would make every later line look
// had.
const MaxCodexOrdinalGap = codex.MaxOrdinalGap

// errCodexBatchFull stops a read at the batch bound.
var errCodexBatchFull = errors.New("batch full")

// read queues the new lines of cf, up to the batch bounds. A file that
// cannot be read (not there yet) is tried again at the next pass.
func (f *CodexFollower) read(cf *codexFile) {
	cf.tail.Final = f.final
	f.reads++
	cf.lastRead = f.reads
	var bytesQueued int
	reset, err := cf.tail.ReadNew(func(l Line) error {
		if len(cf.pending) >= MaxBatchRecords || (bytesQueued >= MaxBatchBytes && len(cf.pending) > 0) {
			return errCodexBatchFull
		}
		if l.TooLong {
			f.log.Warn("a rollout line is longer than the limit; skipped", "file", cf.path, "line", l.Num, "bytes", l.Size)
			return nil
		}
		r, err := codex.Parse(l.Data)
		if err != nil {
			f.log.Warn("a rollout line is not a record; skipped", "file", cf.path, "line", l.Num, "partial", l.Partial, "err", err)
			return nil
		}
		// A line without an ordinal (older Codex) counts as its line
		// number from 0, as Codex counts.
		o := int64(l.Num - 1)
		if r.HasOrdinal {
			o = r.Ordinal
		}
		if o-max(cf.seen, int64(l.Num-1)) > MaxCodexOrdinalGap {
			if !cf.oddLog {
				f.log.Warn("a rollout line's ordinal is far past the lines before it; skipped", "file", cf.path, "line", l.Num, "ordinal", o)
				cf.oddLog = true
			}
			return nil
		}
		if o <= cf.seen {
			return nil // had (a file read again from the start)
		}
		cf.seen = o
		if r.Timestamp > 0 {
			cf.lastTS = r.Timestamp
		}
		cf.pending = append(cf.pending, CodexLine{Record: r, Thread: cf.thread, Ordinal: o, File: cf.path, Replayed: o <= cf.replayTo, ts: cf.lastTS, seq: f.reads})
		bytesQueued += len(l.Data)
		return nil
	})
	if reset {
		f.log.Info("a rollout was truncated or replaced; reading it again (lines had are skipped)", "file", cf.path)
	}
	switch {
	case err == nil || errors.Is(err, errCodexBatchFull):
		cf.errLog = false
	case errors.Is(err, os.ErrNotExist):
		// not there yet
	case !cf.errLog:
		f.log.Warn("cannot read a rollout; retrying", "file", cf.path, "err", err)
		cf.errLog = true
	}
}

// CodexRollouts lists the rollout files under a Codex sessions folder
// (CODEX_HOME/sessions), in no particular order: regular files with a
// rollout's name (links and named pipes are left out).
func CodexRollouts(sessionsDir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(sessionsDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		// Regular files only: Codex writes no links, and a named pipe
		// would make the reader wait for a writer.
		if d.Type().IsRegular() && strings.HasSuffix(p, ".jsonl") {
			if _, ok := CodexThreadOf(p); ok {
				out = append(out, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list rollouts in %s: %w", sessionsDir, err)
	}
	return out, nil
}
