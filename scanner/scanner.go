package scanner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/crashpoint"
)

// Defaults of Config, and the scanner's limits (docs/protocol.md, "Limits:
// the transcript scanner").
const (
	DefaultPollInterval   = 2 * time.Second
	DefaultMissingTimeout = 60 * time.Second
	// DefaultParentWindow is Config.ParentWindow's default.
	DefaultParentWindow = 2 * time.Second

	// MaxBatchRecords and MaxBatchBytes bound one batch handed to the
	// sink (a single longer record goes alone), and what a session reads
	// ahead of delivery: a long backlog (a resumed session) flows through
	// in batches instead of being held whole.
	MaxBatchRecords = 1000
	MaxBatchBytes   = 4 << 20

	// RetryMin and RetryMax bound the backoff after the sink or the
	// cursor save failed: the wait doubles from RetryMin up to RetryMax
	// until a pass succeeds. Nothing read is dropped meanwhile.
	RetryMin = 100 * time.Millisecond
	RetryMax = 5 * time.Second
	// FinalRetryWindow is how long the last pass keeps retrying a failing
	// sink or cursor save before Run returns the error; what was not
	// stored is read again at the next start.
	FinalRetryWindow = 2 * time.Second
)

// ErrStopped is returned by Flush once Run has returned.
var ErrStopped = errors.New("the scanner has stopped")

// Record is a transcript record read by the scanner.
type Record struct {
	*claude.Record
	File string
	Line int
	// Replayed marks a record before the durable cursor: its output was
	// already stored before a restart. Consumers use it to rebuild their
	// state (the mapper's open turn, subagents) and need not send it again.
	Replayed bool
}

// ErrHold, returned by a Sink's Deliver (wrapped or not), says that it
// cannot take the batch yet and nothing is wrong: the scanner delivers the
// same batch again at a later pass (Retry set), keeps the session's cursor
// before it, and logs nothing.
var ErrHold = errors.New("hold the batch: deliver it again later")

// Batch is a run of new records of one session, merged across its files in
// timestamp order like `ccrelay replay` merges them.
type Batch struct {
	Session string
	Records []Record
	// Retry marks a batch whose delivery failed before: it holds exactly
	// the records of that attempt.
	Retry bool
}

// Sink receives batches in order. When Deliver returns nil the output of the
// batch is durable (in the outbox) and the scanner moves its cursor past it.
// After an error the same batch is delivered again (Retry set), with
// backoff, until it succeeds; nothing of its session comes before it.
type Sink interface {
	Deliver(ctx context.Context, b Batch) error
}

// Config configures a Scanner.
type Config struct {
	// ProjectDir is Claude's folder for the working directory
	// (claude.ProjectDir).
	ProjectDir string
	// CursorFile persists the cursor; "" keeps it in memory only.
	CursorFile     string
	PollInterval   time.Duration
	MissingTimeout time.Duration
	// NoWatch disables fsnotify: polling only.
	NoWatch bool
	// Notice is where the user hears (stderr, once each) that Claude's
	// transcripts cannot be watched (a limit of the kernel's) and that
	// they are watched again. nil: the log only.
	Notice io.Writer
	// WatchFiles watches each followed transcript instead of the project
	// folder (default on kqueue platforms, macOS and the BSDs: see
	// watchFilesDefault).
	WatchFiles *bool
	// OrderWindow is how long a record may wait for another file of its
	// session that is behind in time (a subagent writing while the main
	// thread does). Records are delivered in timestamp order across files;
	// a file quiet for this long is not waited for. Default 500 ms.
	OrderWindow time.Duration
	// LaunchWindow is how long records after a subagent launch wait for
	// the subagent's file to appear (default 2 s): on a busy machine Claude
	// can take longer than OrderWindow to create it.
	LaunchWindow time.Duration
	// ParentWindow is how long a main-transcript record whose parent is
	// not written yet waits for it (claude.Lineage; default
	// DefaultParentWindow), held with what follows it, at most
	// claude.MaxHeld records.
	ParentWindow time.Duration
	MaxLine      int
	Logger       *slog.Logger
	Now          func() time.Time
}

// Scanner follows the transcript files of the sessions announced to it.
// Run owns its only goroutine; AddSession and Flush may be called from any
// goroutine.
type Scanner struct {
	cfg  Config
	sink Sink
	log  *slog.Logger

	add     chan announce
	flushes chan chan error
	synced  chan struct{} // a token after each successful pass, for tests (buffered 1)
	done    chan struct{} // closed when Run returns

	cursor   Cursor
	dirty    bool // a committed position changed since the last save
	sessions []*session
	files    map[string]*file
	// dedupe holds one set per session: a fork (or a resume into a new
	// session) copies its parent's records with their uuids, and they
	// belong to the new session as much as to the old one (D21).
	dedupe   map[string]*claude.Dedupe
	final    bool // the last pass: nothing waits, a last line without newline is read
	flushing bool // a pass for Flush: nothing waits

	// Storing (the sink, the cursor) failed: the episode under way.
	failing  error
	failedAt time.Time
	failures int
	backoff  time.Duration

	watchState
	polled atomic.Bool // Polled
	// listSubagents lists a session's subagent transcripts (a seam for
	// tests).
	listSubagents func(main string) ([]string, error)
}

type announce struct{ id, path string }

type session struct {
	id           string
	main         string // the main transcript
	missingSince time.Time
	dead         bool
	seen         bool // its main file was seen at least once
	listFailed   bool // the subagents folder could not be listed (logged)

	// A subagent launched in the main transcript writes a file of its own
	// that may not exist yet: records after the launch wait for it a little.
	nFiles      int       // subagent files with records at the last pass
	expectTS    int64     // timestamp of the launch
	expectSince time.Time // when the launch was read; zero: nothing expected

	// lineage remembers the lines of the main transcript read, to put
	// its records in parent order (claude.Lineage).
	lineage claude.Lineage

	// Read ahead of delivery, across the session's files.
	pendingRecords int
	pendingBytes   int64
	// A batch whose delivery failed, delivered again before anything else,
	// and how many records of each file it holds.
	retry     []Record
	retryTake map[*file]int
}

type file struct {
	session   string
	tail      *Tail
	committed Position
	replayTo  int64 // records ending at or before this offset are Replayed
	verify    bool  // the saved position is checked before the replay
	more      bool  // reading stopped at the read-ahead bound
	errLogged bool

	pending []pendingRecord // read, not yet delivered, in file order
	lastTS  int64           // latest record timestamp read
	grew    time.Time       // when new lines last appeared
	// parser reads its lines in one pass each (claude.LineParser).
	parser claude.LineParser
}

type pendingRecord struct {
	rec   Record
	ts    int64
	start int64 // offset of the line
	size  int64
	// held is 1 + the record's line number in its session's lineage while
	// it waits for its parent (claude.Lineage.Waits), 0 otherwise; since
	// is when it was read.
	held  uint64
	since time.Time
}

// errAhead stops reading a file at the read-ahead bound; errTorn stops at a
// last line that is incomplete. Neither is a failure.
var (
	errAhead = errors.New("read-ahead bound reached")
	errTorn  = errors.New("last line is incomplete")
)

// New returns a scanner. It follows no session until one is announced; the
// cursor file gives the positions of sessions followed before (pruned: see
// MaxCursorSessions).
func New(cfg Config, sink Sink) (*Scanner, error) {
	if cfg.WatchFiles == nil {
		cfg.WatchFiles = &watchFilesDefault
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MissingTimeout <= 0 {
		cfg.MissingTimeout = DefaultMissingTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = DefaultMaxLine
	}
	if cfg.LaunchWindow <= 0 {
		cfg.LaunchWindow = 2 * time.Second
	}
	if cfg.OrderWindow <= 0 {
		cfg.OrderWindow = 500 * time.Millisecond
	}
	if cfg.ParentWindow <= 0 {
		cfg.ParentWindow = DefaultParentWindow
	}
	s := &Scanner{cfg: cfg, sink: sink, log: cfg.Logger, add: make(chan announce, 16), flushes: make(chan chan error),
		done: make(chan struct{}), synced: make(chan struct{}, 1), files: map[string]*file{},
		listSubagents: claude.SubagentFiles}
	s.watchState = newWatchState()
	c, err := LoadCursor(cfg.CursorFile)
	if err != nil {
		s.log.Warn("scanner cursor", "err", err)
	}
	c.prune(cfg.ProjectDir)
	s.cursor = c
	return s, nil
}

// AddSession announces a session (from the SessionStart hook) whose
// transcript is in ProjectDir. A new id becomes current; sessions announced
// before keep being followed.
func (s *Scanner) AddSession(id string) { s.AddSessionPath(id, "") }

// AddSessionPath announces a session with the transcript path the hook
// reported: where Claude really writes (the working directory's resolved
// path when it was reached through a symlink). The file and the subagents/
// folder beside it are followed. A path that is not the session's
// transcript (another name, relative, outside the folder of Claude's
// projects) is ignored with a warning and the session's file in ProjectDir
// is followed instead; "" means that file too.
func (s *Scanner) AddSessionPath(id, transcriptPath string) {
	if id == "" || strings.ContainsAny(id, `/\`) {
		return
	}
	select {
	case s.add <- announce{id, transcriptPath}:
	case <-s.done: // the scanner has stopped: nothing to announce to
	}
}

// Synced returns a channel that receives a token after each successful
// pass.
func (s *Scanner) Synced() <-chan struct{} { return s.synced }

// Flush makes a pass at once and returns when everything read by it is
// delivered, without waiting for order across files: call it when Claude
// has stopped writing. While storing fails it waits for a pass that works,
// or for ctx.
func (s *Scanner) Flush(ctx context.Context) error {
	w := make(chan error, 1)
	select {
	case s.flushes <- w:
	case <-s.done:
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

// transcriptPath checks a transcript path reported by the hook.
func (s *Scanner) transcriptPath(id, p string) string {
	def := claude.TranscriptPath(s.cfg.ProjectDir, id)
	if p == "" || p == def {
		return def
	}
	projects := filepath.Dir(s.cfg.ProjectDir)
	ok := filepath.IsAbs(p) && filepath.Clean(p) == p && filepath.Base(p) == id+".jsonl" &&
		sameDir(filepath.Dir(filepath.Dir(p)), projects)
	if !ok {
		s.log.Warn("ignored a transcript path that is not the session's file in Claude's projects folder",
			"session", id, "path", p, "projects", projects, "following", def)
		return def
	}
	return p
}

// sameDir reports whether a and b name the same folder, symlinks resolved.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

func (s *Scanner) addSession(a announce) {
	main := s.transcriptPath(a.id, a.path)
	s.cursor.touch(s.cfg.ProjectDir, a.id, main)
	for _, ss := range s.sessions {
		if ss.id == a.id {
			if ss.dead {
				ss.dead, ss.missingSince = false, time.Time{}
				s.log.Info("session announced again; following it", "session", a.id)
			}
			if main != ss.main {
				ss.main, ss.seen, ss.missingSince = main, false, time.Time{}
				s.log.Info("following the session's transcript where the hook says it is", "session", a.id, "file", main)
			}
			return
		}
	}
	s.sessions = append(s.sessions, &session{id: a.id, main: main})
}

// Run scans until ctx is done. When ctx is done it makes one last pass, in
// which nothing waits, before returning. A failing sink or cursor save does
// not end it: the pass is retried with backoff (RetryMin to RetryMax) until
// it works; only the last pass gives up, after FinalRetryWindow, and
// returns the error.
func (s *Scanner) Run(ctx context.Context) error {
	defer close(s.done)
	if !s.cfg.NoWatch {
		s.openWatcher() // failing, retried by the passes (beginWatchPass)
	}
	defer s.closeWatcher()
	interval := s.pollInterval(s.cfg.PollInterval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var waiting []chan error // Flush calls waiting for the next pass
	for {
		served := waiting
		waiting = nil
		s.flushing = len(served) > 0
		err := s.sync(ctx)
		s.flushing = false
		s.noteResult(err)
		if err == nil {
			for _, w := range served {
				w <- nil
			}
			select {
			case s.synced <- struct{}{}:
			default:
			}
		} else {
			waiting = served // they wait for a pass that works
		}
		if iv := s.pollInterval(s.cfg.PollInterval); iv != interval {
			interval = iv
			tick.Reset(iv)
		}
		events, werrs := s.events() // the watcher may have been made by this pass
		var wait <-chan time.Time
		switch {
		case err != nil:
			wait = time.After(s.backoff)
		case s.hasPending():
			wait = time.After(s.cfg.OrderWindow)
		}
		// While storing fails only the backoff ends the wait; events
		// are still taken so that the watcher never blocks.
		for woken := false; !woken; {
			select {
			case <-wait:
				woken = true
			case <-ctx.Done():
				return s.finish(ctx, waiting)
			case a := <-s.add:
				s.addSession(a)
				woken = err == nil
			case w := <-s.flushes:
				waiting = append(waiting, w)
				woken = err == nil
			case <-events:
				woken = err == nil
			case werr := <-werrs:
				// Events may have been lost (the kernel's queue
				// overflowed): a pass looks at once.
				s.log.Warn("file watch error; checking now", "err", werr)
				woken = err == nil
			case <-tick.C:
				woken = err == nil
			}
		}
		// Coalesce whatever else is pending into this pass.
		for drained := false; !drained; {
			select {
			case a := <-s.add:
				s.addSession(a)
			case w := <-s.flushes:
				waiting = append(waiting, w)
			case <-events:
			default:
				drained = true
			}
		}
	}
}

// finish makes the last pass: what Claude wrote before it exited is read
// and delivered, retried for at most FinalRetryWindow.
func (s *Scanner) finish(ctx context.Context, waiting []chan error) error {
	for drained := false; !drained; {
		select {
		case a := <-s.add:
			s.addSession(a)
		case w := <-s.flushes:
			waiting = append(waiting, w)
		default:
			drained = true
		}
	}
	s.final = true
	fctx := context.WithoutCancel(ctx)
	deadline := time.Now().Add(FinalRetryWindow)
	backoff := RetryMin
	for {
		err := s.sync(fctx)
		s.noteResult(err)
		if err == nil || !time.Now().Before(deadline) {
			for _, w := range waiting {
				w <- err
			}
			return err
		}
		t := time.NewTimer(min(backoff, time.Until(deadline)))
		<-t.C
		backoff = min(2*backoff, RetryMax)
	}
}

// noteResult keeps track of storing failures: one warning when an episode
// starts, one line when it ends, and the backoff in between.
func (s *Scanner) noteResult(err error) {
	if err == nil {
		if s.failing != nil {
			s.log.Info("storing records works again; nothing was lost", "failed_for", time.Since(s.failedAt).Round(time.Millisecond),
				"attempts", s.failures)
		}
		s.failing, s.failures, s.backoff = nil, 0, 0
		return
	}
	if s.failing == nil {
		s.log.Warn("cannot store what Claude wrote; retrying until it works (nothing is lost meanwhile)", "err", err,
			"retry_every_at_most", RetryMax)
		s.failedAt, s.backoff = time.Now(), RetryMin
	} else {
		s.backoff = min(2*s.backoff, RetryMax)
	}
	s.failing = err
	s.failures++
}

// sync reads what was appended to every file of every live session,
// delivers it and saves the cursor.
func (s *Scanner) sync(ctx context.Context) error {
	s.beginWatchPass()
	s.missingFile = false
	if !*s.cfg.WatchFiles {
		s.watch(s.cfg.ProjectDir)
	}
	var err error
	for _, ss := range s.sessions {
		if ss.dead {
			continue
		}
		if err = s.syncSession(ctx, ss); err != nil {
			break
		}
	}
	s.endWatchPass()
	if s.dirty {
		crashpoint.Hit(crashpoint.ScannerDelivered)
		if serr := s.saveCursor(); serr != nil {
			return errors.Join(err, serr)
		}
		s.dirty = false
	}
	return err
}

func (s *Scanner) syncSession(ctx context.Context, ss *session) error {
	subDir := filepath.Join(strings.TrimSuffix(ss.main, ".jsonl"), "subagents")
	if *s.cfg.WatchFiles {
		s.watchFile(ss.main)
	} else {
		s.watch(filepath.Dir(ss.main))
	}
	s.watch(subDir)
	if *s.cfg.WatchFiles && s.watcher != nil && !s.watched[subDir] && !s.watched[filepath.Dir(subDir)] {
		// No folder of the session to watch for its first subagent's
		// transcript: looked for at the fallback interval.
		s.missingFile = true
	}
	paths := []string{ss.main}
	subs, err := s.listSubagents(ss.main)
	switch {
	case err != nil && !ss.listFailed:
		s.log.Warn("cannot list the session's subagent transcripts; their records wait until it can", "session", ss.id,
			"dir", subDir, "err", err)
		ss.listFailed = true
	case err == nil:
		if ss.listFailed {
			s.log.Info("the session's subagent transcripts can be listed again", "session", ss.id, "dir", subDir)
		}
		ss.listFailed = false
		paths = append(paths, subs...)
	}
	files := make([]*file, len(paths))
	for i, p := range paths {
		files[i] = s.fileFor(ss, p)
	}
	// Read and deliver in rounds while a file stopped at the read-ahead
	// bound.
	for {
		withRecords, more := 0, false
		for i, f := range files {
			s.readFile(ss, f, i == 0)
			if i > 0 && f.lastTS > 0 {
				withRecords++
			}
			more = more || f.more
		}
		// The awaited subagent file has records (Claude creates it a
		// moment before it writes the first one: an empty file is not
		// the end of the wait).
		if withRecords > ss.nFiles {
			ss.expectSince = time.Time{}
		}
		ss.nFiles = withRecords
		delivered, err := s.release(ctx, ss, files)
		if err != nil || !more || !delivered {
			return err
		}
	}
}

func (s *Scanner) hasPending() bool {
	for _, f := range s.files {
		if len(f.pending) > 0 {
			return true
		}
	}
	return false
}

// release delivers the pending records of a session's files in batches
// (see nextBatch), then moves the committed positions to just before each
// file's first undelivered record. It reports whether anything was
// delivered.
func (s *Scanner) release(ctx context.Context, ss *session, files []*file) (bool, error) {
	delivered := false
	for {
		out, take, retry := ss.retry, ss.retryTake, ss.retry != nil
		if !retry {
			out, take = s.nextBatch(ss, files)
		}
		if len(out) == 0 {
			break
		}
		if err := s.sink.Deliver(ctx, Batch{Session: ss.id, Records: out, Retry: retry}); err != nil {
			ss.retry, ss.retryTake = out, take
			if errors.Is(err, ErrHold) {
				// Not yet: the batch is delivered again at a later pass,
				// and the cursor stays before it.
				break
			}
			return delivered, fmt.Errorf("deliver records of session %s: %w", ss.id, err)
		}
		ss.retry, ss.retryTake = nil, nil
		for f, n := range take {
			f.pop(ss, n)
		}
		delivered = true
	}
	for _, f := range files {
		pos := f.tail.Position()
		if len(f.pending) > 0 {
			// The first in the file: records put in parent order may
			// have left it behind the first pending.
			first := f.pending[0]
			for _, p := range f.pending[1:] {
				if p.start < first.start {
					first = p
				}
			}
			pos = Position{Offset: first.start, Line: first.rec.Line - 1, ID: pos.ID}
		}
		if pos.Offset < f.replayTo {
			continue // replaying what is durable: the saved position stands
		}
		if !pos.Equal(f.committed) {
			f.committed, s.dirty = pos, true
		}
	}
	return delivered, nil
}

// nextBatch takes the next records to deliver, merged in timestamp order
// (ties: the file listed first, the main transcript), at most
// MaxBatchRecords and MaxBatchBytes. A recent record waits while another
// file that has nothing pending is behind it in time and was active within
// OrderWindow: that file may still be writing something older. A file that
// stopped at the read-ahead bound is read further before anything after
// its pending records goes.
func (s *Scanner) nextBatch(ss *session, files []*file) ([]Record, map[*file]int) {
	now := s.cfg.Now()
	wait := !s.final && !s.flushing
	take := map[*file]int{}
	var out []Record
	var size int64
	for len(out) < MaxBatchRecords && size < MaxBatchBytes {
		var head *file
		var headTS int64
		blocked := false
		for _, f := range files {
			i := take[f]
			if i == len(f.pending) {
				blocked = blocked || f.more
				continue
			}
			if head == nil || f.pending[i].ts < headTS {
				head, headTS = f, f.pending[i].ts
			}
		}
		if head == nil || blocked {
			break
		}
		if p := head.pending[take[head]]; p.held != 0 {
			// A main-chain record whose parent was not read when it was
			// (claude.Lineage): its parent and the records between go in
			// front of it once read; until then it waits, with what
			// follows it, at most ParentWindow and claude.MaxHeld records,
			// and not at all in a pass that waits for nothing.
			rest := head.pending[take[head]:]
			rest[0].held = 0
			if !claude.Hoist(&ss.lineage, rest, p.held-1, pendingRecordOf) {
				if wait && len(rest) < claude.MaxHeld && now.Sub(p.since) < s.cfg.ParentWindow {
					rest[0].held = p.held
					break
				}
				continue // passed on in file order
			}
			for j := range rest {
				if rest[j].rec.Record == p.rec.Record {
					break
				}
				rest[j].ts = min(rest[j].ts, p.ts)
			}
			continue
		}
		// Only recent records wait: history (a resumed session, a restart)
		// flows at once, and no record waits past OrderWindow after its own
		// time.
		age := now.Sub(time.UnixMilli(headTS))
		if wait && age < s.cfg.LaunchWindow && now.Sub(ss.expectSince) < s.cfg.LaunchWindow &&
			!ss.expectSince.IsZero() && headTS > ss.expectTS {
			break
		}
		if wait && age < s.cfg.OrderWindow {
			behind := false
			for _, f := range files {
				if f != head && take[f] == len(f.pending) && f.lastTS < headTS && now.Sub(f.grew) < s.cfg.OrderWindow {
					behind = true
					break
				}
			}
			if behind {
				break
			}
		}
		p := head.pending[take[head]]
		out = append(out, p.rec)
		size += p.size
		take[head]++
	}
	return out, take
}

func pendingRecordOf(p pendingRecord) *claude.Record { return p.rec.Record }

// pop drops the first n pending records, delivered. Their slots are
// cleared so that delivered records do not stay reachable through the
// slice's backing array.
func (f *file) pop(ss *session, n int) {
	for _, p := range f.pending[:n] {
		ss.pendingRecords--
		ss.pendingBytes -= p.size
	}
	clear(f.pending[:n])
	f.pending = f.pending[n:]
	if len(f.pending) == 0 {
		f.pending = nil
	}
}

func (s *Scanner) fileFor(ss *session, path string) *file {
	f := s.files[path]
	if f == nil {
		pos, ok := s.cursor.Files[path]
		f = &file{session: ss.id, committed: pos, tail: NewTail(path, pos)}
		// The durable part is read again to rebuild dedupe and the
		// consumer's state, delivered as Replayed, once the saved
		// position is known to hold (the same file, not rewritten).
		f.verify = ok && pos.Offset > 0
		f.tail.MaxLine = s.cfg.MaxLine
		s.files[path] = f
	}
	return f
}

// readFile reads what was appended to f into its pending records, until
// the session's read-ahead bound.
func (s *Scanner) readFile(ss *session, f *file, isMain bool) {
	path := f.tail.Path
	if f.verify {
		holds, err := f.tail.Verify()
		if err == nil {
			f.verify = false
			if holds {
				f.replayTo = f.committed.Offset
				f.tail.Rewind()
			} else {
				// ReadNew reads it from the start: nothing is Replayed,
				// and what was stored before is stored once more by id.
				s.log.Info("transcript was replaced while ccrelay was not running; reading it again", "file", path)
			}
		}
	}
	f.more = false
	f.tail.Final, f.tail.Through = s.final, f.replayTo
	grew := false
	reset, err := f.tail.ReadNew(func(l Line) error {
		if len(f.pending) > 0 && (ss.pendingRecords >= MaxBatchRecords || ss.pendingBytes >= MaxBatchBytes) {
			return errAhead
		}
		grew = true
		replayed := !l.Reread && l.Next <= f.replayTo
		if l.TooLong {
			s.log.Warn("skipped a line longer than the limit", "file", path, "line", l.Num, "bytes", l.Size, "limit", s.cfg.MaxLine)
			return nil
		}
		if len(l.Data) == 0 {
			return nil
		}
		// One pass over the line classifies it and, for a conversation
		// record, parses a copy of it (the line's buffer is reused); a
		// record that is not conversation keeps nothing of it (D14).
		var r *claude.Record
		var uuid, parent []byte
		var err error
		if isMain {
			r, uuid, parent, err = f.parser.ParseLineLink(l.Data)
		} else {
			r, err = f.parser.ParseLine(l.Data)
		}
		if err != nil {
			// Which of the two it is: a line that is not a record at
			// all (or not yet: the last one, torn), or a conversation
			// record that does not parse.
			if _, perr := claude.PeekType(l.Data); perr != nil {
				if l.Partial {
					s.log.Info("the last line has no end (Claude stopped while writing it); not sent", "file", path, "line", l.Num)
					return errTorn
				}
				s.log.Warn("skipped a line that is not a record", "file", path, "line", l.Num, "err", perr)
				return nil
			}
			s.log.Warn("skipped a malformed record", "file", path, "line", l.Num, "err", err)
			return nil
		}
		if !claude.IsConversationType(r.Type) {
			// In the chain (claude.Lineage), when its uuid is a string
			// that is not empty.
			if len(uuid) > 2 && uuid[0] == '"' {
				ss.lineage.AddRaw(uuid, parent)
			}
			return nil // D14
		}
		if r.Timestamp > f.lastTS {
			f.lastTS = r.Timestamp
		}
		var held uint64
		if isMain {
			waits := !replayed && ss.lineage.Waits(r)
			if n := ss.lineage.Add(r.UUID, r.ParentUUID, true); waits {
				held = n + 1
			}
		}
		dd := s.dedupe[ss.id]
		if dd == nil {
			if s.dedupe == nil {
				s.dedupe = map[string]*claude.Dedupe{}
			}
			dd = &claude.Dedupe{Window: claude.DedupeWindow}
			s.dedupe[ss.id] = dd
		}
		if dd.Seen(r) {
			return nil
		}
		if isMain && launchesSubagent(r) {
			ss.expectTS, ss.expectSince = f.lastTS, s.cfg.Now()
		}
		// A record without a timestamp sorts with the one before it.
		size := int64(len(l.Data))
		p := pendingRecord{rec: Record{Record: r, File: path, Line: l.Num, Replayed: replayed},
			ts: f.lastTS, start: l.Start, size: size, held: held}
		if held != 0 {
			p.since = s.cfg.Now()
		}
		f.pending = append(f.pending, p)
		ss.pendingRecords++
		ss.pendingBytes += size
		return nil
	})
	if grew {
		f.grew = s.cfg.Now()
	}
	switch {
	case errors.Is(err, errAhead):
		f.more, err = true, nil
	case errors.Is(err, errTorn):
		err = nil
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if isMain {
				s.missing(ss, path)
			}
			return
		}
		if !f.errLogged {
			s.log.Warn("cannot read transcript; will retry", "file", path, "err", err)
			f.errLogged = true
		}
		return
	}
	f.errLogged = false
	if isMain {
		ss.seen, ss.missingSince = true, time.Time{}
	}
	if reset {
		f.replayTo = 0
		s.log.Info("transcript was truncated or replaced; reading it again", "file", path)
	}
}

func (s *Scanner) missing(ss *session, path string) {
	if ss.seen {
		return // deleted after being read: nothing more will come
	}
	now := s.cfg.Now()
	if ss.missingSince.IsZero() {
		ss.missingSince = now
		return
	}
	if now.Sub(ss.missingSince) >= s.cfg.MissingTimeout {
		ss.dead = true
		s.log.Warn("transcript never appeared; giving up on the session", "session", ss.id, "file", path,
			"waited", now.Sub(ss.missingSince).Round(time.Second))
	}
}

func (s *Scanner) saveCursor() error {
	for p, f := range s.files {
		s.cursor.Files[p] = f.committed
	}
	s.cursor.trim(s.cfg.ProjectDir)
	return s.cursor.Save(s.cfg.CursorFile)
}

// launchesSubagent reports whether a main-transcript record starts a
// subagent (a Task or Agent tool call), whose records go to a file of its own.
func launchesSubagent(r *claude.Record) bool {
	if r.Type != claude.TypeAssistant || r.IsSidechain || r.Message == nil {
		return false
	}
	for _, b := range r.Message.Content.Blocks {
		if b.Type == "tool_use" && (b.Name == "Agent" || b.Name == "Task") {
			return true
		}
	}
	return false
}
