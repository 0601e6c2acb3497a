// Package apiclient is the CLI's side of the relay connection: a durable
// outbox on disk and a client that sends it to the relay, oldest first,
// dropping an envelope only once the relay acknowledged it (ARCHITECTURE
// principle 2, DECISIONS D9). It knows nothing of Claude's formats.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/durable"
	"github.com/ccrelay/ccrelay/protocol"
)

// Outbox is an append-only log of envelopes on disk with an acknowledged
// offset. Memory use does not depend on how much is waiting.
//
// The log is a file of JSON lines, one envelope each. A log that was
// compacted starts with a header line naming its generation; the
// acknowledged offset is saved with the generation of the log it counts
// in, so an offset saved for an earlier log is never applied to a later
// one. The log's length is always what the outbox counts: a write that
// fails, even part-way (a full disk), is cut off again before Append
// returns its error.
type Outbox struct {
	dir     string
	openLog func(path string) (LogFile, error)
	logger  *slog.Logger
	// stop, when set (tests), is called at each named step of a durable
	// change; an error stops the change there, as a crash would.
	stop   func(step string) error
	sealer Sealer

	mu       sync.Mutex
	log      LogFile
	gen      int64 // the log's generation (0: never compacted, no header)
	start    int64 // bytes of the header line
	size     int64 // bytes in the log
	acked    int64 // bytes of the log the relay acknowledged
	dirty    bool  // the file may be longer than size: cut it before writing
	reported int64 // skipped lines before this offset were logged
	notify   chan struct{}
	relay    string       // RelayIdentity of the relay the envelopes are for ("" unknown)
	held     []HeldOutbox // what waits for other relays
}

// entry is one line of the log.
type entry struct {
	Session  string          `json:"s"`
	ID       string          `json:"i"`
	Envelope json.RawMessage `json:"e"`
	// Blob is the content the relay keeps beside the envelope
	// (protocol.Envelope.Blob), if any.
	Blob []byte `json:"b,omitempty"`
}

// header is the first line of a compacted log.
type header struct {
	Gen int64 `json:"gen"`
}

const (
	logName   = "outbox.log"
	ackedName = "outbox.acked"
	// compactAt: when everything is acknowledged and the log is larger than
	// this, it is replaced by an empty one.
	compactAt = 1 << 20
)

// LogFile is what the outbox needs of its log file. *os.File implements
// it; a test can wrap one to make writes fail as on a full disk.
type LogFile interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (os.FileInfo, error)
	Close() error
}

// OutboxOptions configures OpenOutboxWith.
type OutboxOptions struct {
	// OpenLog opens a log file for reading and writing, creating it if
	// needed (default: os.OpenFile, mode 0600).
	OpenLog func(path string) (LogFile, error)
	// Logger receives what the outbox repairs or skips (default: discard).
	Logger *slog.Logger
	// Sealer, when set, seals the envelopes of the sessions it says
	// (end-to-end encryption): the log holds them sealed.
	Sealer Sealer
	// Relay, when set, is the relay (its URL) the envelopes are for: the
	// outbox holds what it kept for another relay aside for that relay
	// (Held), and takes what waited for this one (outbox_relay.go).
	Relay string
	// held: this is a held outbox itself (no held folder of its own).
	held bool
}

// Sealer seals envelopes for the relay (a Keyring).
type Sealer interface {
	Sealing(session string) bool
	Seal(session string, env *protocol.Envelope) (raw, blob []byte, err error)
}

// chainKeeper is a Sealer that links what it seals in a chain (chain.go):
// the outbox keeps the chain where it was when a write fails, and saves
// it when one succeeds.
type chainKeeper interface {
	ChainMark(session string) (int64, string)
	ChainRestore(session string, n int64, last string)
	ChainSave(session string) error
}

func openLogFile(path string) (LogFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}

// OpenOutbox opens the outbox in dir (created if needed).
func OpenOutbox(dir string) (*Outbox, error) { return OpenOutboxWith(dir, OutboxOptions{}) }

// OpenOutboxWith opens the outbox in dir (created if needed) with opts.
func OpenOutboxWith(dir string, opts OutboxOptions) (*Outbox, error) {
	if opts.OpenLog == nil {
		opts.OpenLog = openLogFile
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	relay := ""
	if opts.Relay != "" {
		relay = RelayIdentity(opts.Relay)
		if err := bindRelay(dir, relay, opts); err != nil {
			return nil, err
		}
	}
	f, err := opts.OpenLog(filepath.Join(dir, logName))
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	o := &Outbox{dir: dir, openLog: opts.OpenLog, logger: opts.Logger, sealer: opts.Sealer, log: f, size: fi.Size(), notify: make(chan struct{}, 1)}
	if err := o.load(); err != nil {
		f.Close()
		return nil, err
	}
	o.relay = relay
	if relay != "" && !opts.held {
		if err := o.takeHeld(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return o, nil
}

// load reads the log's header and the acknowledged offset, cuts a torn
// last line, and puts the offset on a line boundary.
func (o *Outbox) load() error {
	if err := o.readHeader(); err != nil {
		return err
	}
	// A torn last line (crash mid-append) is cut off.
	if err := o.repairTail(); err != nil {
		return err
	}
	o.acked = o.start
	b, err := os.ReadFile(filepath.Join(o.dir, ackedName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("open outbox: %w", err)
	}
	n, gen, ok := parseAcked(b)
	switch {
	case !ok:
		o.logger.Warn("outbox: acknowledged offset unreadable; sending the whole log again", "offset", 0, "content", string(b))
		return nil
	case gen != o.gen:
		// Saved for an earlier log (a compaction stopped before the new
		// offset was written): everything in this log is unsent.
		o.logger.Warn("outbox: acknowledged offset belongs to an earlier log; sending this log whole",
			"offset", n, "offsetGeneration", gen, "logGeneration", o.gen)
		return nil
	case n < o.start || n > o.size:
		o.logger.Warn("outbox: acknowledged offset outside the log; sending the whole log again", "offset", n, "size", o.size)
		return nil
	}
	o.acked = n
	if o.acked > o.start {
		// The offset must end a line: otherwise go back to the start of
		// that line (sending it again is harmless; ids are derived).
		c := make([]byte, 1)
		if _, err := o.log.ReadAt(c, o.acked-1); err != nil {
			return fmt.Errorf("check outbox: %w", err)
		}
		if c[0] != '\n' {
			lineStart, err := o.lastLineEnd(o.acked)
			if err != nil {
				return err
			}
			o.logger.Warn("outbox: acknowledged offset is not on a line boundary; sending that line again",
				"offset", o.acked, "lineStart", max(lineStart, o.start))
			o.acked = max(lineStart, o.start)
		}
	}
	return nil
}

// parseAcked reads "offset" (a log never compacted) or "offset gen".
func parseAcked(b []byte) (offset, gen int64, ok bool) {
	f := strings.Fields(string(b))
	if len(f) == 0 || len(f) > 2 {
		return 0, 0, false
	}
	offset, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || offset < 0 {
		return 0, 0, false
	}
	if len(f) == 2 {
		if gen, err = strconv.ParseInt(f[1], 10, 64); err != nil || gen < 0 {
			return 0, 0, false
		}
	}
	return offset, gen, true
}

// readHeader reads the generation from the log's first line, if it is a
// header.
func (o *Outbox) readHeader() error {
	if o.size == 0 {
		return nil
	}
	buf := make([]byte, min(o.size, 64))
	if _, err := o.log.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read outbox: %w", err)
	}
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil
	}
	var h header
	if json.Unmarshal(buf[:i], &h) != nil || h.Gen <= 0 || bytes.Contains(buf[:i], []byte(`"s"`)) {
		return nil
	}
	o.gen, o.start = h.Gen, int64(i+1)
	return nil
}

// lastLineEnd returns the offset just past the last newline before end
// (0 if there is none).
func (o *Outbox) lastLineEnd(end int64) (int64, error) {
	const chunk = 64 << 10
	for end > 0 {
		start := max(end-chunk, 0)
		b := make([]byte, end-start)
		if _, err := o.log.ReadAt(b, start); err != nil {
			return 0, fmt.Errorf("check outbox: %w", err)
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

func (o *Outbox) repairTail() error {
	if o.size == 0 {
		return nil
	}
	buf := make([]byte, 1)
	if _, err := o.log.ReadAt(buf, o.size-1); err != nil {
		return fmt.Errorf("check outbox: %w", err)
	}
	if buf[0] == '\n' {
		return nil
	}
	end, err := o.lastLineEnd(o.size)
	if err != nil {
		return err
	}
	o.logger.Warn("outbox: cutting a torn last line (written part-way before a crash or a full disk)",
		"offset", end, "bytes", o.size-end)
	if err := o.log.Truncate(end); err != nil {
		return fmt.Errorf("repair outbox: %w", err)
	}
	if err := o.log.Sync(); err != nil {
		return fmt.Errorf("repair outbox: %w", err)
	}
	o.size = end
	return nil
}

// Close closes the log.
func (o *Outbox) Close() error { return o.log.Close() }

// Append writes envelopes of session durably (fsync) before returning. It
// implements the launcher's Outbox. On error nothing was appended: the
// caller keeps the envelopes and appends them again later.
func (o *Outbox) Append(_ context.Context, session string, envs []protocol.Envelope) (err error) {
	var buf []byte
	sealing := o.sealer != nil && len(envs) > 0 && o.sealer.Sealing(session)
	chain, chained := o.sealer.(chainKeeper)
	chained = chained && sealing
	if chained {
		n, last := chain.ChainMark(session)
		defer func() {
			if err != nil {
				chain.ChainRestore(session, n, last)
			}
		}()
	}
	for i := range envs {
		var raw, blob []byte
		var err error
		if sealing {
			raw, blob, err = o.sealer.Seal(session, &envs[i])
		} else {
			raw, err = envs[i].AppendJSON(nil)
			blob = envs[i].Blob
		}
		if err != nil {
			return fmt.Errorf("encode envelope: %w", err)
		}
		line, _ := json.Marshal(entry{Session: session, ID: envs[i].ID, Envelope: raw, Blob: blob})
		buf = append(append(buf, line...), '\n')
	}
	if err := o.appendRaw(buf); err != nil {
		return err
	}
	if chained {
		if err := chain.ChainSave(session); err != nil {
			o.logger.Warn("outbox: the sealed chain's end was not saved: a resumed session shows a break there", "session", session, "err", err)
		}
	}
	return nil
}

func (o *Outbox) appendRaw(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dirty {
		if err := o.cutBack(); err != nil {
			return fmt.Errorf("write outbox: the log could not be restored after an earlier failed write: %w", err)
		}
	}
	if _, err := o.log.WriteAt(buf, o.size); err != nil {
		return o.undo(fmt.Errorf("write outbox: %w", err))
	}
	crashpoint.Hit(crashpoint.OutboxWritten)
	if err := o.log.Sync(); err != nil {
		return o.undo(fmt.Errorf("sync outbox: %w", err))
	}
	crashpoint.Hit(crashpoint.OutboxSynced)
	o.size += int64(len(buf))
	select {
	case o.notify <- struct{}{}:
	default:
	}
	return nil
}

// undo cuts what a failed write may have left beyond size and returns
// err (with the cut's failure, if any). Called with mu held.
func (o *Outbox) undo(err error) error {
	if cerr := o.cutBack(); cerr != nil {
		return errors.Join(err, fmt.Errorf("restore outbox: %w", cerr))
	}
	return err
}

// cutBack truncates the log to size and checks that it is that long. Until
// it succeeds the log counts as dirty and nothing is written. Called with
// mu held.
func (o *Outbox) cutBack() error {
	o.dirty = true
	if err := o.log.Truncate(o.size); err != nil {
		return err
	}
	fi, err := o.log.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != o.size {
		return fmt.Errorf("log is %d bytes after truncating to %d", fi.Size(), o.size)
	}
	o.dirty = false
	return nil
}

// Pending is the number of bytes not yet acknowledged.
func (o *Outbox) Pending() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.size - o.acked
}

// batch is a run of unacknowledged envelopes of one session.
type batch struct {
	session   string
	envelopes []json.RawMessage
	ids       []string
	blobs     []protocol.Blob
	blobOf    [][]byte // the blob of each envelope (nil: none), as in blobs
	end       int64    // log offset after the batch
}

// next reads the oldest unacknowledged run of one session, at most max
// envelopes and, but for its first envelope, at most maxBytes of envelope
// JSON and blobs; nil when everything is acknowledged. Lines it cannot read are
// skipped (they would block everything behind them) and logged once each.
func (o *Outbox) next(max int, maxBytes int) (*batch, error) {
	o.mu.Lock()
	from, size, gen := o.acked, o.size, o.gen
	o.mu.Unlock()
	if from >= size {
		return nil, nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(o.log, from, size-from), 64<<10)
	b := &batch{end: from}
	n := 0 // bytes of envelope JSON and blobs in the batch
	for len(b.envelopes) < max {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			break
		}
		var e entry
		switch {
		case line[len(line)-1] != '\n':
			o.skipped(gen, b.end, len(line), "torn line: no newline at the end of the log")
			b.end += int64(len(line))
			continue
		case json.Unmarshal(line, &e) != nil:
			o.skipped(gen, b.end, len(line), "unreadable line: not JSON")
			b.end += int64(len(line))
			continue
		case e.ID == "" || e.Session == "" || len(e.Envelope) == 0:
			o.skipped(gen, b.end, len(line), "unreadable line: no session, id or envelope")
			b.end += int64(len(line))
			continue
		}
		if b.session == "" && len(b.envelopes) == 0 {
			b.session = e.Session
		}
		if e.Session != b.session {
			break
		}
		size := len(e.Envelope) + len(e.Blob)*4/3
		if len(b.envelopes) > 0 && n+size > maxBytes {
			// Too large to join: it starts the next batch (read again
			// from b.end).
			break
		}
		b.envelopes = append(b.envelopes, e.Envelope)
		b.ids = append(b.ids, e.ID)
		b.blobOf = append(b.blobOf, e.Blob)
		if len(e.Blob) > 0 {
			b.blobs = append(b.blobs, protocol.Blob{ID: e.ID, Data: e.Blob})
		}
		n += size
		b.end += int64(len(line))
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return b, nil
}

// skipped logs a line next skips, unless it was logged before.
func (o *Outbox) skipped(gen, offset int64, n int, why string) {
	o.mu.Lock()
	fresh := gen == o.gen && offset >= o.reported
	if fresh {
		o.reported = offset + int64(n)
	}
	o.mu.Unlock()
	if fresh {
		o.logger.Warn("outbox: skipping a line", "offset", offset, "bytes", n, "why", why)
	}
}

// ack records that everything up to end was acknowledged. When that is the
// whole log and the log is large, it is replaced by an empty log of the
// next generation first, then the new offset is saved: a crash between the
// two leaves an offset of an earlier generation, which the next open
// ignores.
func (o *Outbox) ack(end int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if end <= o.acked {
		return nil
	}
	o.acked = end
	crashpoint.Hit(crashpoint.OutboxAcked)
	if o.acked == o.size && o.size > compactAt && !o.dirty {
		if err := o.compact(); err != nil {
			return err
		}
	}
	return writeFileDurable(filepath.Join(o.dir, ackedName), []byte(strconv.FormatInt(o.acked, 10)+" "+strconv.FormatInt(o.gen, 10)))
}

// compact replaces the fully acknowledged log by an empty one of the next
// generation. Called with mu held.
func (o *Outbox) compact() error {
	gen := o.gen + 1
	h, _ := json.Marshal(header{Gen: gen})
	h = append(h, '\n')
	f, err := replaceFile(filepath.Join(o.dir, logName), o.openLog, func(f LogFile) error {
		_, err := f.WriteAt(h, 0)
		return err
	})
	if f == nil {
		return fmt.Errorf("compact outbox: %w", err)
	}
	// The log was replaced: from here on the outbox counts in the new one.
	o.log.Close()
	o.log = f
	crashpoint.Hit(crashpoint.OutboxCompacted)
	if serr := o.step("compact-log-replaced"); serr != nil {
		return serr
	}
	o.gen, o.start, o.size, o.acked, o.reported = gen, int64(len(h)), int64(len(h)), int64(len(h)), 0
	if err != nil {
		return fmt.Errorf("compact outbox: %w", err)
	}
	return nil
}

// replaceFile durably replaces the file at path with one that write fills
// (durable.Replace: write a temporary file, fsync, rename, fsync the
// folder). It returns the new file, open, whenever the rename happened
// (also with the folder's fsync error). Every file the outbox replaces goes
// through here.
func replaceFile(path string, open func(string) (LogFile, error), write func(LogFile) error) (LogFile, error) {
	return durable.Replace(path, open, write)
}

// writeFileDurable replaces path with data through replaceFile.
func writeFileDurable(path string, data []byte) error {
	f, err := replaceFile(path, openLogFile, func(f LogFile) error {
		_, err := f.WriteAt(data, 0)
		return err
	})
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// step calls the test seam, if any, at a named step.
func (o *Outbox) step(name string) error {
	if o.stop == nil {
		return nil
	}
	return o.stop(name)
}

// adoptBatch bounds how many envelopes Adopt copies with one append.
const adoptBatch = 256

// Adopt appends the unacknowledged envelopes of the outbox in dir (one that
// a ccrelay which ended left) to o, oldest first, each with its blob, and
// returns how many it copied. The outbox in dir is not changed: remove it once Adopt returned
// nil. A crash before that copies them again, which costs nothing more than
// sending them twice (the relay stores an envelope id once). The caller
// makes sure no other process writes to dir meanwhile.
//
// The envelopes belong to the relay they were recorded for: those of an
// outbox for another relay than o's are held in o for that relay (Held),
// not copied into o's log, and so are those that the outbox in dir held.
func (o *Outbox) Adopt(dir string) (int, error) {
	if o.relay == "" {
		return o.adoptLog(dir)
	}
	n := 0
	ents, err := os.ReadDir(filepath.Join(dir, heldDirName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("adopt outbox %s: %w", dir, err)
	}
	for _, e := range ents {
		sub := filepath.Join(dir, heldDirName, e.Name())
		switch relay := readRelay(sub); {
		case !e.IsDir() || relay == "":
		case relay == o.relay:
			m, err := o.adoptLog(sub)
			n += m
			if err != nil {
				return n, err
			}
		default:
			if _, err := o.holdFrom(sub, relay); err != nil {
				return n, err
			}
		}
	}
	if relay := readRelay(dir); relay != "" && relay != o.relay {
		if _, err := o.holdFrom(dir, relay); err != nil {
			return n, err
		}
	} else {
		m, err := o.adoptLog(dir)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, o.scanHeld()
}

// adoptLog is Adopt of the log in dir alone, whatever relay it is for.
func (o *Outbox) adoptLog(dir string) (int, error) {
	if _, err := os.Stat(filepath.Join(dir, logName)); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	src, err := OpenOutboxWith(dir, OutboxOptions{OpenLog: o.openLog, Logger: o.logger})
	if err != nil {
		return 0, fmt.Errorf("adopt outbox: %w", err)
	}
	defer src.Close()
	n := 0
	for {
		b, err := src.next(adoptBatch, MaxBatchBytes)
		if err != nil {
			return n, fmt.Errorf("adopt outbox %s: %w", dir, err)
		}
		if b == nil {
			return n, nil
		}
		src.mu.Lock()
		from := src.acked
		src.mu.Unlock()
		if b.end <= from {
			return n, fmt.Errorf("adopt outbox %s: no progress at offset %d", dir, from)
		}
		var buf []byte
		for i := range b.envelopes {
			// As written: a sealed envelope and its blob stay sealed.
			line, _ := json.Marshal(entry{Session: b.session, ID: b.ids[i], Envelope: b.envelopes[i], Blob: b.blobOf[i]})
			buf = append(append(buf, line...), '\n')
		}
		if err := o.appendRaw(buf); err != nil {
			return n, fmt.Errorf("adopt outbox %s: %w", dir, err)
		}
		crashpoint.Hit(crashpoint.AdoptCopied)
		n += len(b.envelopes)
		src.mu.Lock()
		src.acked = b.end
		src.mu.Unlock()
	}
}
