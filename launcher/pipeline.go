// Package launcher starts and stops Claude Code in local and remote mode,
// learns its session from the SessionStart hook, and feeds what Claude
// writes through the mapper to an outbox. It does not talk to the network.
package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/claude"
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
		held: map[string]time.Time{}, passing: map[string]bool{}, now: time.Now}
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
		return p.holdRemote(session, b)
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
// record remote mode never prints passes after RemoteHoldWindow. Called
// with mu held.
func (p *Pipeline) holdRemote(session string, b scanner.Batch) error {
	seen := p.streamed[session]
	durable := len(p.unsent[session]) == 0
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
			return scanner.ErrHold
		}
		if p.now().Sub(since) < RemoteHoldWindow {
			return scanner.ErrHold
		}
		break // held long enough: remote mode does not print it
	}
	delete(p.held, session)
	return nil
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
		seen = &claude.Dedupe{}
		p.streamed[session] = seen
	}
	var envs []protocol.Envelope
	for _, r := range recs {
		if seen.Seen(r) {
			continue
		}
		envs = append(envs, m.Map(r)...)
	}
	return p.appendTo(ctx, session, envs)
}

// CloseTurn ends the open turn of one session with status.
func (p *Pipeline) CloseTurn(ctx context.Context, session string, status protocol.TurnStatus, nowMS int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	session, m := p.mapperFor(session)
	m.SetTime(nowMS)
	return p.appendTo(ctx, session, m.Close(status))
}

// Note adds a service message of the launcher's own to the session (in its
// open turn, or a turn of its own).
func (p *Pipeline) Note(ctx context.Context, session, source, text string, nowMS int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	session, m := p.mapperFor(session)
	m.SetTime(nowMS)
	return p.appendTo(ctx, session, m.Note(source, text))
}

// Close ends the open turn of every session with status and appends what
// that produced, after what failed to append before.
func (p *Pipeline) Close(ctx context.Context, status protocol.TurnStatus, nowMS int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, session := range p.order {
		m := p.mappers[session]
		m.SetTime(nowMS)
		if err := p.appendTo(ctx, session, m.Close(status)); err != nil {
			return err
		}
	}
	return nil
}

// FileOutbox appends envelopes as JSON lines to a file and fsyncs it: the
// durable outbox until the relay client provides one. It stores an envelope
// id once: after a crash between an append and the scanner's cursor save,
// the re-delivered envelopes are recognised and not written again.
type FileOutbox struct {
	mu   sync.Mutex
	f    *os.File
	have map[string]struct{}
}

// OpenFileOutbox opens (creating or appending to) path and reads the ids it
// already holds.
func OpenFileOutbox(path string) (*FileOutbox, error) {
	have := map[string]struct{}{}
	if old, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(old)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var e struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.ID != "" {
				have[e.ID] = struct{}{}
			}
		}
		old.Close()
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	return &FileOutbox{f: f, have: have}, nil
}

// Append implements Outbox.
func (o *FileOutbox) Append(_ context.Context, _ string, envs []protocol.Envelope) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var buf []byte
	ids := map[string]struct{}{}
	for i := range envs {
		_, dup := o.have[envs[i].ID]
		if _, again := ids[envs[i].ID]; dup || again {
			continue
		}
		ids[envs[i].ID] = struct{}{}
		var err error
		if buf, err = envs[i].AppendJSON(buf); err != nil {
			return fmt.Errorf("encode envelope: %w", err)
		}
		buf = append(buf, '\n')
	}
	if len(buf) == 0 {
		return nil
	}
	// The ids count as stored only once the write is durable: a failed
	// write is retried in full (and what it left is cut off).
	before, statErr := o.f.Seek(0, io.SeekEnd)
	_, err := o.f.Write(buf)
	if err == nil {
		err = o.f.Sync()
	}
	if err != nil {
		if statErr == nil {
			o.f.Truncate(before)
		}
		return fmt.Errorf("write outbox: %w", err)
	}
	maps.Copy(o.have, ids)
	return nil
}

// Close closes the file.
func (o *FileOutbox) Close() error { return o.f.Close() }

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
