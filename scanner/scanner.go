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

// Batch is what one read of one file produced: the new records (possibly
// none) and the position to commit once their output is durable.
type Batch struct {
	Session string
	File    string
	Records []Record
	Pos     Position
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
	MaxLine int
	Logger  *slog.Logger
	Now     func() time.Time
}

// Scanner follows the transcript files of the sessions announced to it.
// Run owns its only goroutine; AddSession may be called from any goroutine.
type Scanner struct {
	cfg  Config
	sink Sink
	log  *slog.Logger

	add    chan string
	synced chan struct{} // a token after each sync, for tests (buffered 1)

	cursor   Cursor
	sessions []*session
	files    map[string]*file
	dedupe   claude.Dedupe
	watcher  *fsnotify.Watcher
	watched  map[string]bool
}

type session struct {
	id           string
	missingSince time.Time
	dead         bool
	seen         bool // its main file was seen at least once
}

type file struct {
	session   string
	tail      *Tail
	committed Position
	replayTo  int64 // records ending at or before this offset are Replayed
	errLogged bool
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
	s := &Scanner{cfg: cfg, sink: sink, log: cfg.Logger, add: make(chan string, 16),
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
	s.add <- id
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
		select {
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
		for _, p := range paths {
			if err := s.readFile(ctx, ss, p, p == main); err != nil {
				return err
			}
		}
	}
	return nil
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

func (s *Scanner) readFile(ctx context.Context, ss *session, path string, isMain bool) error {
	f := s.fileFor(ss, path)
	var recs []Record
	reset, err := f.tail.ReadNew(func(l Line) error {
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
		if s.dedupe.Seen(r) {
			return nil
		}
		recs = append(recs, Record{Record: r, File: path, Line: l.Num, Replayed: replayed})
		return nil
	})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if isMain {
				s.missing(ss, path)
			}
			return nil
		}
		if !f.errLogged {
			s.log.Warn("cannot read transcript; will retry", "file", path, "err", err)
			f.errLogged = true
		}
		return nil
	}
	f.errLogged = false
	if isMain {
		ss.seen, ss.missingSince = true, time.Time{}
	}
	if reset {
		f.replayTo = 0
		s.log.Info("transcript was truncated or replaced; reading it again", "file", path)
	}
	pos := f.tail.Position()
	if len(recs) == 0 && pos.Equal(f.committed) {
		return nil
	}
	if len(recs) > 0 {
		if err := s.sink.Deliver(ctx, Batch{Session: ss.id, File: path, Records: recs, Pos: pos}); err != nil {
			return fmt.Errorf("deliver records of %s: %w", path, err)
		}
	}
	f.committed = pos
	return s.saveCursor()
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
