// Package launcher starts and stops Claude Code in local and remote mode,
// learns its session from the SessionStart hook, and feeds what Claude
// writes through the mapper to an outbox. It does not talk to the network.
package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// Outbox stores envelopes durably before they are sent. Append returns only
// once the envelopes are durable.
type Outbox interface {
	Append(ctx context.Context, session string, envs []protocol.Envelope) error
}

// Pipeline maps the records the scanner delivers into envelopes and puts
// them in the outbox. It is the scanner's Sink: the scanner's cursor moves
// only after Append succeeded (ARCHITECTURE principle 2). Each Claude
// session (a /clear starts a new one) has its own mapper and is its own
// relay session, so live ids equal those of `ccrelay replay` of each
// session's transcript.
type Pipeline struct {
	mu      sync.Mutex
	fixed   string // if set, every record is mapped in this session
	mappers map[string]*mapper.Mapper
	order   []string
	outbox  Outbox
	// remote marks the sessions remote mode drives: their records come
	// from stream-json, and what the scanner reads of them is dropped.
	remote map[string]bool
	// streamed remembers what remote mode mapped, so that the scanner does
	// not map it again after a switch back to local mode.
	streamed map[string]*claude.Dedupe
	// unsent holds, per session, envelopes whose append failed (a full
	// disk): they go first in the session's next append, or at Close.
	// Remote mode cannot read them again; the scanner delivers the same
	// batch again (Retry), which must not go through the mapper twice.
	unsent map[string][]protocol.Envelope
	// held is when the scanner's batch of a remote session was first held
	// back (see holdRemote); an entry lives while a batch is held.
	held map[string]time.Time
	// passing marks a session handed back to the scanner while a batch of
	// its remote stint was held: that batch, delivered again, is dropped
	// as remote mode's (its stream-json copy was mapped).
	passing map[string]bool
	now     func() time.Time
	// turnsPath is where the open turn of each session is kept (KeepTurns,
	// turnstate.go; "": nowhere), saved what it holds; orphans are the
	// turns an earlier run left open, ended before anything else of their
	// session.
	turnsPath string
	turnsLog  *slog.Logger
	saved     map[string]mapper.OpenTurn
	orphans   map[string]mapper.OpenTurn
	// models is each session's latest model (pipeline_model.go);
	// modelChanged signals a change (capacity 1).
	models       map[string]string
	modelChanged chan struct{}
}

// RemoteHoldWindow bounds how long the scanner's cursor of a remote
// session is held before a conversation record whose stream-json copy is
// not yet in the outbox (remote mode keeps a tool call in memory for up to
// 250 ms): after it, the record is passed over as remote mode never
// printed it.
const RemoteHoldWindow = 5 * time.Second

// NewPipeline returns a pipeline writing to out. A non-empty sessionID maps
// every record as part of that session (DECISIONS D1 ids are derived from
// it); "" follows the session of each batch.
func NewPipeline(sessionID string, out Outbox) *Pipeline {
	return &Pipeline{fixed: sessionID, mappers: map[string]*mapper.Mapper{}, outbox: out,
		remote: map[string]bool{}, streamed: map[string]*claude.Dedupe{}, unsent: map[string][]protocol.Envelope{},
		held: map[string]time.Time{}, passing: map[string]bool{}, now: time.Now, orphans: map[string]mapper.OpenTurn{},
		models: map[string]string{}, modelChanged: make(chan struct{}, 1)}
}

// appendTo appends envs of session after what an earlier failed append of
// it left; on failure it keeps them all for the next try. Called with mu
// held.
func (p *Pipeline) appendTo(ctx context.Context, session string, envs []protocol.Envelope) error {
	if held := p.unsent[session]; len(held) > 0 {
		envs = append(held[:len(held):len(held)], envs...)
	}
	if len(envs) == 0 {
		return nil
	}
	if err := p.outbox.Append(ctx, session, envs); err != nil {
		p.unsent[session] = envs
		return err
	}
	delete(p.unsent, session)
	p.saveTurn(session)
	return nil
}

func (p *Pipeline) mapperFor(session string) (string, *mapper.Mapper) {
	if p.fixed != "" {
		session = p.fixed
	}
	m := p.mappers[session]
	if m == nil {
		m = mapper.New(session)
		p.mappers[session] = m
		p.order = append(p.order, session)
	}
	return session, m
}

// Deliver implements scanner.Sink. Records marked Replayed (before the
// durable cursor, re-read after a restart) rebuild the mapper's state; their
// envelopes were stored before and are not appended again.
func (p *Pipeline) Deliver(ctx context.Context, b scanner.Batch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	session, m := p.mapperFor(b.Session)
	if p.remote[session] {
		return p.holdRemote(ctx, session, m, b)
	}
	if b.Retry && p.passing[session] {
		delete(p.passing, session)
		return nil
	}
	if _, ok := p.unsent[session]; ok && b.Retry {
		return p.appendTo(ctx, session, nil) // mapped already
	}
	seen := p.streamed[session]
	var envs []protocol.Envelope
	for _, r := range b.Records {
		if seen != nil && seen.Has(r.Record) {
			continue // mapped from stream-json in remote mode
		}
		if !r.Replayed {
			envs = append(envs, p.adoptBefore(session, m, r.Record)...)
		}
		p.noteModel(session, r.Record)
		out := m.Map(r.Record)
		if !r.Replayed {
			envs = append(envs, out...)
		}
	}
	return p.appendTo(ctx, session, envs)
}

// holdRemote takes the scanner's batch of a session remote mode drives.
// Remote mode maps this session from stream-json, so the scanner's copy is
// dropped, but only once every conversation record of it has its envelopes
// in the outbox (mapped from stream-json, nothing unsent): until then the
// batch is held (scanner.ErrHold), so the scanner's cursor stays at the
// last record whose envelopes are on disk, and a crash loses nothing. A
// record remote mode never prints passes after RemoteHoldWindow, except
// Claude's bookkeeping (the repair a resumed Claude records and does not
// print, claude.IsRepair), which the mapper gets then if remote mode has
// not given it already. Called with mu held.
func (p *Pipeline) holdRemote(ctx context.Context, session string, m *mapper.Mapper, b scanner.Batch) error {
	seen := p.streamed[session]
	durable := len(p.unsent[session]) == 0
	var repairs []*claude.Record
	for _, r := range b.Records {
		rec := r.Record
		if r.Replayed || (rec.Type != claude.TypeUser && rec.Type != claude.TypeAssistant) || claude.Key(rec) == "" {
			continue
		}
		if durable && seen != nil && seen.Has(rec) {
			continue
		}
		since, ok := p.held[session]
		if !ok {
			p.held[session] = p.now()
			crashpoint.Hit(crashpoint.RemoteHeld)
			return scanner.ErrHold
		}
		if p.now().Sub(since) < RemoteHoldWindow {
			return scanner.ErrHold
		}
		// Held long enough: remote mode does not print it.
		if claude.IsRepair(rec) {
			repairs = append(repairs, rec)
		}
	}
	delete(p.held, session)
	if len(repairs) == 0 {
		return nil
	}
	if seen == nil {
		seen = &claude.Dedupe{Window: claude.DedupeWindow}
		p.streamed[session] = seen
	}
	envs := p.adopt(session, m)
	for _, r := range repairs {
		if !seen.Seen(r) {
			envs = append(envs, m.Map(r)...)
		}
	}
	return p.appendTo(ctx, session, envs)
}

// SetRemote hands session to remote mode (true) or back to the scanner.
func (p *Pipeline) SetRemote(session string, remote bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if remote {
		p.remote[session] = true
		delete(p.passing, session)
		return
	}
	if _, ok := p.held[session]; ok && p.remote[session] {
		p.passing[session] = true
	}
	delete(p.remote, session)
	delete(p.held, session)
}

// MapRecords maps records remote mode read from stream-json and appends
// the envelopes to the outbox.
func (p *Pipeline) MapRecords(ctx context.Context, session string, recs []*claude.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	session, m := p.mapperFor(session)
	seen := p.streamed[session]
	if seen == nil {
		seen = &claude.Dedupe{Window: claude.DedupeWindow}
		p.streamed[session] = seen
	}
	envs := p.adopt(session, m)
	for _, r := range recs {
		if seen.Seen(r) {
			continue
		}
		p.noteModel(session, r)
		envs = append(envs, m.Map(r)...)
	}
	if err := p.appendTo(ctx, session, envs); err != nil {
		return err
	}
	if len(envs) > 0 {
		crashpoint.Hit(crashpoint.RemoteMapped)
	}
	return nil
}

// OpenTurn is the id of the session's open turn, or "".
func (p *Pipeline) OpenTurn(session string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, m := p.mapperFor(session)
	return m.Turn()
}

// CloseTurn ends the open turn of one session with status.
func (p *Pipeline) CloseTurn(ctx context.Context, session string, status protocol.TurnStatus, nowMS int64) error {
	return p.emit(ctx, session, nowMS, func(m *mapper.Mapper) []protocol.Envelope { return m.Close(status) })
}

// emit appends to one session, at nowMS, what its mapper had waiting
// (adopt) and then what f makes of it.
func (p *Pipeline) emit(ctx context.Context, session string, nowMS int64, f func(*mapper.Mapper) []protocol.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	session, m := p.mapperFor(session)
	m.SetTime(nowMS)
	envs := p.adopt(session, m)
	return p.appendTo(ctx, session, append(envs, f(m)...))
}

// Cut ends the open turn of one session as one Claude did not finish
// (mapper.Cut): every call it left open ends once, the note says why.
func (p *Pipeline) Cut(ctx context.Context, session string, c mapper.Cut, nowMS int64) error {
	return p.emit(ctx, session, nowMS, func(m *mapper.Mapper) []protocol.Envelope { return m.Cut(c) })
}

// EndTurn ends the open turn of one session that Claude was stopped in:
// completed when Claude had finished it, else cut with c (a call without
// a result, results the model had not answered).
func (p *Pipeline) EndTurn(ctx context.Context, session string, c mapper.Cut, nowMS int64) error {
	return p.emit(ctx, session, nowMS, func(m *mapper.Mapper) []protocol.Envelope {
		if m.Unfinished() {
			return m.Cut(c)
		}
		return m.Close(protocol.StatusCompleted)
	})
}

// Note adds a service message of the launcher's own to the session (in its
// open turn, or a turn of its own).
func (p *Pipeline) Note(ctx context.Context, session, source, text string, nowMS int64) error {
	return p.emit(ctx, session, nowMS, func(m *mapper.Mapper) []protocol.Envelope { return m.Note(source, text) })
}

// Close ends the open turn of every session with status and appends what
// that produced, after what failed to append before; the turns an earlier
// run left open end too (StoppedCut).
func (p *Pipeline) Close(ctx context.Context, status protocol.TurnStatus, nowMS int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, session := range slices.Sorted(maps.Keys(p.orphans)) {
		p.mapperFor(session)
	}
	for _, session := range p.order {
		m := p.mappers[session]
		m.SetTime(nowMS)
		envs := p.adopt(session, m)
		if err := p.appendTo(ctx, session, append(envs, m.Close(status)...)); err != nil {
			return err
		}
	}
	return nil
}

// FileOutbox appends envelopes as JSON lines to files and fsyncs them: the
// durable record when no relay is set up. Each line is the envelope with
// the key "session" added (readers of envelopes ignore it). It stores an
// envelope id once: after a crash between an append and the scanner's
// cursor save, the re-delivered envelopes are recognised and not written
// again.
//
// Opened with OpenFileOutbox it writes one file for every session (--out);
// with OpenSessionOutbox one file per session in a folder (the default).
// Nothing is read when it opens: a session's ids are read the first time
// that session is appended to (its whole file in a folder; the last
// FileOutboxDedupeWindow bytes of a shared file). Any number of processes
// may append to the same files: every write, and the cut-back after a
// failed one, holds an exclusive flock on the file.
type FileOutbox struct {
	mu   sync.Mutex
	dir  string // per-session files in dir; "" for one file
	path string // the one file
	// f and have are the one file and its ids (one-file mode).
	f     *os.File
	have  map[string]struct{}
	files map[string]*outFile // per session, in folder mode
}

// FileOutboxDedupeWindow bounds what a shared --out file is read of (its
// end) for the ids it holds, when the first envelope is appended. An
// envelope that a crashed run appended before that window and that is
// delivered again (its cursor was lost) is written a second time: readers
// dedupe by id, as the relay does.
const FileOutboxDedupeWindow = 8 << 20

type outFile struct {
	f    *os.File
	have map[string]struct{}
}

// OpenFileOutbox opens (creating or appending to) the one file at path.
func OpenFileOutbox(path string) (*FileOutbox, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	return &FileOutbox{path: path, f: f}, nil
}

// OpenSessionOutbox keeps one file per session, <dir>/<session>.jsonl.
func OpenSessionOutbox(dir string) (*FileOutbox, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	return &FileOutbox{dir: dir, files: map[string]*outFile{}}, nil
}

// SessionPath is the file a session's envelopes go to.
func (o *FileOutbox) SessionPath(session string) string {
	if o.dir == "" {
		return o.path
	}
	return filepath.Join(o.dir, session+".jsonl")
}

// file returns the file for session and its ids, reading them the first
// time. Called with mu held.
func (o *FileOutbox) file(session string) (*outFile, error) {
	if o.dir == "" {
		if o.have == nil {
			have, err := readIDs(o.f, FileOutboxDedupeWindow)
			if err != nil {
				return nil, err
			}
			o.have = have
		}
		return &outFile{f: o.f, have: o.have}, nil
	}
	if of := o.files[session]; of != nil {
		return of, nil
	}
	if !ValidSessionID(session) {
		return nil, fmt.Errorf("outbox: session id %q is not a UUID", clip(session, 100))
	}
	f, err := os.OpenFile(o.SessionPath(session), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	have, err := readIDs(f, -1)
	if err != nil {
		f.Close()
		return nil, err
	}
	of := &outFile{f: f, have: have}
	o.files[session] = of
	return of, nil
}

// readIDs reads the envelope ids of f's last window bytes (all: -1).
func readIDs(f *os.File, window int64) (map[string]struct{}, error) {
	have := map[string]struct{}{}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	from := int64(0)
	if window >= 0 && fi.Size() > window {
		// From the byte before the window: the first line read is the
		// rest of a line cut by the window (or empty), and is skipped.
		from = fi.Size() - window - 1
	}
	sc := bufio.NewScanner(io.NewSectionReader(f, from, fi.Size()-from))
	sc.Buffer(nil, 64<<20)
	first := from > 0 // the window starts inside a line: skip its rest
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.ID != "" {
			have[e.ID] = struct{}{}
		}
	}
	return have, nil
}

// Append implements Outbox.
func (o *FileOutbox) Append(_ context.Context, session string, envs []protocol.Envelope) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	of, err := o.file(session)
	if err != nil {
		return err
	}
	var buf []byte
	ids := map[string]struct{}{}
	prefix, _ := json.Marshal(struct {
		S string `json:"session"`
	}{session})
	prefix = append(prefix[:len(prefix)-1], ',') // {"session":"…",
	for i := range envs {
		_, dup := of.have[envs[i].ID]
		if _, again := ids[envs[i].ID]; dup || again {
			continue
		}
		ids[envs[i].ID] = struct{}{}
		line, err := envs[i].AppendJSON(nil)
		if err != nil || len(line) < 2 || line[0] != '{' {
			return fmt.Errorf("encode envelope: %v", err)
		}
		buf = append(append(append(buf, prefix...), line[1:]...), '\n')
	}
	if len(buf) == 0 {
		return nil
	}
	if err := appendLocked(of.f, buf); err != nil {
		return err
	}
	// The ids count as stored only once the write is durable: a failed
	// write is retried in full.
	maps.Copy(of.have, ids)
	return nil
}

// appendLocked appends buf to f and fsyncs it, holding an exclusive flock
// on f: another process appending to the same file waits, so the cut-back
// after a failed write takes off only what this one left.
func appendLocked(f *os.File, buf []byte) error {
	if err := lockFile(f, true); err != nil {
		return fmt.Errorf("lock outbox: %w", err)
	}
	defer unlockFile(f)
	before, statErr := f.Seek(0, io.SeekEnd)
	_, err := f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		if statErr == nil {
			f.Truncate(before)
		}
		return fmt.Errorf("write outbox: %w", err)
	}
	return nil
}

// Close closes the files.
func (o *FileOutbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	if o.f != nil {
		errs = append(errs, o.f.Close())
	}
	for _, of := range o.files {
		errs = append(errs, of.f.Close())
	}
	return errors.Join(errs...)
}

// MemOutbox keeps envelopes in memory (tests, replay to stdout).
type MemOutbox struct {
	mu   sync.Mutex
	envs []protocol.Envelope
}

// Append implements Outbox.
func (o *MemOutbox) Append(_ context.Context, _ string, envs []protocol.Envelope) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.envs = append(o.envs, envs...)
	return nil
}

// Envelopes returns a copy of what was appended.
func (o *MemOutbox) Envelopes() []protocol.Envelope {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]protocol.Envelope(nil), o.envs...)
}
