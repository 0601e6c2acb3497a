package scanner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ccrelay/ccrelay/claude"
)

// Defaults of Config.
const (
	DefaultPollInterval   = 2 * time.Second
	DefaultMissingTimeout = 60 * time.Second
)

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

// Batch is a run of new records of one session, merged across its files in
// timestamp order like `ccrelay replay` merges them.
type Batch struct {
	Session string
	Records []Record
}

// Sink receives batches in order. When Deliver returns nil the output of the
// batch is durable (in the outbox) and the scanner moves its cursor past it.
// An error stops the scan; the batch is read again after a restart.
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
	// OrderWindow is how long a record may wait for another file of its
	// session that is behind in time (a subagent writing while the main
	// thread does). Records are delivered in timestamp order across files;
	// a file quiet for this long is not waited for. Default 500 ms.
	OrderWindow time.Duration
	// LaunchWindow is how long records after a subagent launch wait for
	// the subagent's file to appear (default 2 s): on a busy machine Claude
	// can take longer than OrderWindow to create it.
	LaunchWindow time.Duration
	MaxLine      int
	Logger       *slog.Logger
	Now          func() time.Time
}

// Scanner follows the transcript files of the sessions announced to it.
// Run owns its only goroutine; AddSession may be called from any goroutine.
type Scanner struct {
	cfg  Config
	sink Sink
	log  *slog.Logger

	add    chan string
	synced chan struct{} // a token after each sync, for tests (buffered 1)
	done   chan struct{} // closed when Run returns

	cursor   Cursor
	sessions []*session
	files    map[string]*file
	// dedupe holds one set per session: a fork (or a resume into a new
	// session) copies its parent's records with their uuids, and they
	// belong to the new session as much as to the old one (D21).
	dedupe  map[string]*claude.Dedupe
	watcher *fsnotify.Watcher
	watched map[string]bool
	final   bool // the last pass: nothing waits
}

type session struct {
	id           string
	missingSince time.Time
	dead         bool
	seen         bool // its main file was seen at least once

	// A subagent launched in the main transcript writes a file of its own
	// that may not exist yet: records after the launch wait for it a little.
	nFiles      int       // subagent files with records at the last pass
	expectTS    int64     // timestamp of the launch
	expectSince time.Time // when the launch was read; zero: nothing expected
}

type file struct {
	session   string
	tail      *Tail
	committed Position
	replayTo  int64 // records ending at or before this offset are Replayed
	errLogged bool

	pending []pendingRecord // read, not yet delivered, in file order
	lastTS  int64           // latest record timestamp read
	grew    time.Time       // when new lines last appeared
}

type pendingRecord struct {
	rec   Record
	ts    int64
	start int64 // offset of the line
}

// New returns a scanner; it starts with the sessions and positions of the
// cursor file, if any.
func New(cfg Config, sink Sink) (*Scanner, error) {
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
	s := &Scanner{cfg: cfg, sink: sink, log: cfg.Logger, add: make(chan string, 16), done: make(chan struct{}),
		synced: make(chan struct{}, 1), files: map[string]*file{}, watched: map[string]bool{}}
	c, err := LoadCursor(cfg.CursorFile)
	if err != nil {
		s.log.Warn("scanner cursor", "err", err)
	}
	s.cursor = c
	for _, id := range c.Sessions {
		s.addSession(id)
	}
	return s, nil
}

// AddSession announces a session (from the SessionStart hook). A new id
// becomes current; sessions seen before keep being followed.
func (s *Scanner) AddSession(id string) {
	if id == "" || strings.ContainsAny(id, `/\`) {
		return
	}
	select {
	case s.add <- id:
	case <-s.done: // the scanner has stopped: nothing to announce to
	}
}

// Synced returns a channel that receives a token after each sync pass.
func (s *Scanner) Synced() <-chan struct{} { return s.synced }

func (s *Scanner) addSession(id string) {
	for _, ss := range s.sessions {
		if ss.id == id {
			if ss.dead {
				ss.dead, ss.missingSince = false, time.Time{}
				s.log.Info("session announced again; following it", "session", id)
			}
			return
		}
	}
	s.sessions = append(s.sessions, &session{id: id})
}

// Run scans until ctx is done or the sink fails. When ctx is done it makes one
// last pass before returning.
func (s *Scanner) Run(ctx context.Context) error {
	defer close(s.done)
	var events <-chan fsnotify.Event
	var werrs <-chan error
	if !s.cfg.NoWatch {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			s.log.Warn("file watching unavailable; polling only", "err", err, "interval", s.cfg.PollInterval)
		} else {
			s.watcher = w
			defer w.Close()
			events, werrs = w.Events, w.Errors
		}
	}
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		if err := s.sync(ctx); err != nil {
			return err
		}
		select {
		case s.synced <- struct{}{}:
		default:
		}
		var wait <-chan time.Time
		if s.hasPending() {
			wait = time.After(s.cfg.OrderWindow)
		}
		select {
		case <-wait:
		case <-ctx.Done():
			// One last pass: what Claude wrote before it exited is read.
			for drained := false; !drained; {
				select {
				case id := <-s.add:
					s.addSession(id)
				default:
					drained = true
				}
			}
			s.final = true // deliver everything read, without waiting for order
			return s.sync(context.WithoutCancel(ctx))
		case id := <-s.add:
			s.addSession(id)
		case <-events:
		case err := <-werrs:
			s.log.Warn("file watch error; the periodic check continues", "err", err)
		case <-tick.C:
		}
		// Coalesce whatever else is pending into this sync.
		for drained := false; !drained; {
			select {
			case id := <-s.add:
				s.addSession(id)
			case <-events:
			default:
				drained = true
			}
		}
	}
}

func (s *Scanner) watch(dir string) {
	if s.watcher == nil || s.watched[dir] {
		return
	}
	if err := s.watcher.Add(dir); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("cannot watch folder; the periodic check covers it", "dir", dir, "err", err)
			s.watched[dir] = true // don't retry every pass
		}
		return
	}
	s.watched[dir] = true
}

// sync reads what was appended to every file of every live session.
func (s *Scanner) sync(ctx context.Context) error {
	s.watch(s.cfg.ProjectDir)
	for _, ss := range s.sessions {
		if ss.dead {
			continue
		}
		main := claude.TranscriptPath(s.cfg.ProjectDir, ss.id)
		paths := []string{main}
		subDir := claude.SubagentDir(s.cfg.ProjectDir, ss.id)
		s.watch(filepath.Dir(subDir))
		s.watch(subDir)
		if subs, err := claude.SubagentFiles(main); err == nil {
			paths = append(paths, subs...)
		}
		files := make([]*file, 0, len(paths))
		withRecords := 0
		for _, p := range paths {
			f := s.readFile(ss, p, p == main)
			files = append(files, f)
			if p != main && f.lastTS > 0 {
				withRecords++
			}
		}
		// The awaited subagent file has records (Claude creates it a
		// moment before it writes the first one: an empty file is not
		// the end of the wait).
		if withRecords > ss.nFiles {
			ss.expectSince = time.Time{}
		}
		ss.nFiles = withRecords
		if err := s.release(ctx, ss, files); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scanner) hasPending() bool {
	for _, f := range s.files {
		if len(f.pending) > 0 {
			return true
		}
	}
	return false
}

// release delivers the pending records of a session's files merged in
// timestamp order (ties: the file listed first, the main transcript). A
// recent record waits while another file that has nothing pending is behind
// it in time and was active within OrderWindow: that file may still be
// writing something older. Then the cursor moves to just before each file's first
// undelivered record.
func (s *Scanner) release(ctx context.Context, ss *session, files []*file) error {
	now := s.cfg.Now()
	var out []Record
	for {
		var head *file
		for _, f := range files {
			if len(f.pending) > 0 && (head == nil || f.pending[0].ts < head.pending[0].ts) {
				head = f
			}
		}
		if head == nil {
			break
		}
		ts := head.pending[0].ts
		// Only recent records wait: history (a resumed session, a restart)
		// flows at once, and no record waits past OrderWindow after its own
		// time.
		ready := true
		recent := now.Sub(time.UnixMilli(ts)) < s.cfg.OrderWindow
		launched := now.Sub(time.UnixMilli(ts)) < s.cfg.LaunchWindow && now.Sub(ss.expectSince) < s.cfg.LaunchWindow
		if launched && !s.final && !ss.expectSince.IsZero() && ts > ss.expectTS {
			ready = false
		}
		for _, f := range files {
			if !recent {
				break
			}
			if !s.final && f != head && len(f.pending) == 0 && f.lastTS < ts && now.Sub(f.grew) < s.cfg.OrderWindow {
				ready = false
				break
			}
		}
		if !ready {
			break
		}
		out = append(out, head.pending[0].rec)
		head.pending = head.pending[1:]
	}
	if len(out) > 0 {
		if err := s.sink.Deliver(ctx, Batch{Session: ss.id, Records: out}); err != nil {
			return fmt.Errorf("deliver records of session %s: %w", ss.id, err)
		}
	}
	changed := false
	for _, f := range files {
		pos := f.tail.Position()
		if len(f.pending) > 0 {
			first := f.pending[0]
			pos = Position{Offset: first.start, Line: first.rec.Line - 1, ID: pos.ID}
		}
		if !pos.Equal(f.committed) {
			f.committed, changed = pos, true
		}
	}
	if !changed {
		return nil
	}
	return s.saveCursor()
}

func (s *Scanner) fileFor(ss *session, path string) *file {
	f := s.files[path]
	if f == nil {
		pos, ok := s.cursor.Files[path]
		f = &file{session: ss.id, committed: pos}
		if ok && pos.Offset > 0 {
			// Read the durable part again to rebuild dedupe and the
			// consumer's state; it is delivered as Replayed.
			f.replayTo = pos.Offset
			f.tail = NewTail(path, Position{ID: pos.ID})
		} else {
			f.tail = NewTail(path, pos)
		}
		f.tail.MaxLine = s.cfg.MaxLine
		s.files[path] = f
	}
	return f
}

// readFile reads what was appended to path into the file's pending records.
func (s *Scanner) readFile(ss *session, path string, isMain bool) *file {
	f := s.fileFor(ss, path)
	grew := false
	reset, err := f.tail.ReadNew(func(l Line) error {
		grew = true
		replayed := l.Next <= f.replayTo
		if l.TooLong {
			s.log.Warn("skipped a line longer than the limit", "file", path, "line", l.Num, "bytes", l.Size, "limit", s.cfg.MaxLine)
			return nil
		}
		if len(l.Data) == 0 {
			return nil
		}
		typ, err := claude.PeekType(l.Data)
		if err != nil {
			s.log.Warn("skipped a line that is not a record", "file", path, "line", l.Num, "err", err)
			return nil
		}
		if !claude.IsConversationType(typ) {
			return nil // D14
		}
		r, err := claude.Parse(append([]byte(nil), l.Data...))
		if err != nil {
			s.log.Warn("skipped a malformed record", "file", path, "line", l.Num, "err", err)
			return nil
		}
		if r.Timestamp > f.lastTS {
			f.lastTS = r.Timestamp
		}
		dd := s.dedupe[ss.id]
		if dd == nil {
			if s.dedupe == nil {
				s.dedupe = map[string]*claude.Dedupe{}
			}
			dd = &claude.Dedupe{}
			s.dedupe[ss.id] = dd
		}
		if dd.Seen(r) {
			return nil
		}
		if isMain && launchesSubagent(r) {
			ss.expectTS, ss.expectSince = f.lastTS, s.cfg.Now()
		}
		// A record without a timestamp sorts with the one before it.
		f.pending = append(f.pending, pendingRecord{rec: Record{Record: r, File: path, Line: l.Num, Replayed: replayed},
			ts: f.lastTS, start: l.Next - l.Size - 1})
		return nil
	})
	if grew {
		f.grew = s.cfg.Now()
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if isMain {
				s.missing(ss, path)
			}
			return f
		}
		if !f.errLogged {
			s.log.Warn("cannot read transcript; will retry", "file", path, "err", err)
			f.errLogged = true
		}
		return f
	}
	f.errLogged = false
	if isMain {
		ss.seen, ss.missingSince = true, time.Time{}
	}
	if reset {
		f.replayTo = 0
		s.log.Info("transcript was truncated or replaced; reading it again", "file", path)
	}
	return f
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
	c := Cursor{Files: map[string]Position{}}
	for _, ss := range s.sessions {
		c.Sessions = append(c.Sessions, ss.id)
	}
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		c.Files[p] = s.files[p].committed
	}
	s.cursor = c
	if err := c.Save(s.cfg.CursorFile); err != nil {
		return err
	}
	return nil
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
