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

	"github.com/ccrelay/ccrelay/protocol"
)

// Outbox is an append-only log of envelopes on disk with an acknowledged
// offset. Memory use does not depend on how much is waiting.
type Outbox struct {
	dir     string
	openLog func(path string) (LogFile, error)
	logger  *slog.Logger
	// stop, when set (tests), is called at each named step of a durable
	// change; an error stops the change there, as a crash would.
	stop func(step string) error

	mu     sync.Mutex
	log    LogFile
	size   int64 // bytes in the log
	acked  int64 // bytes of the log the relay acknowledged
	notify chan struct{}
}

// entry is one line of the log.
type entry struct {
	Session  string          `json:"s"`
	ID       string          `json:"i"`
	Envelope json.RawMessage `json:"e"`
}

const (
	logName   = "outbox.log"
	ackedName = "outbox.acked"
	// compactAt: when everything is acknowledged and the log is larger than
	// this, it is truncated.
	compactAt = 1 << 20
)

// LogFile is what the outbox needs of its log file. *os.File implements
// it; a test can wrap one to make writes fail as on a full disk.
type LogFile interface {
	io.ReaderAt
	io.Writer
	Truncate(size int64) error
	Sync() error
	Stat() (os.FileInfo, error)
	Close() error
}

// OutboxOptions configures OpenOutboxWith.
type OutboxOptions struct {
	// OpenLog opens the log file for reading and writing, creating it if
	// needed (default: os.OpenFile, mode 0600).
	OpenLog func(path string) (LogFile, error)
	// Logger receives what the outbox repairs or skips (default: discard).
	Logger *slog.Logger
}

func openLogFile(path string) (LogFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
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
	f, err := opts.OpenLog(filepath.Join(dir, logName))
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	o := &Outbox{dir: dir, openLog: opts.OpenLog, logger: opts.Logger, log: f, size: fi.Size(), notify: make(chan struct{}, 1)}
	if b, err := os.ReadFile(filepath.Join(dir, ackedName)); err == nil {
		n, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if perr == nil && n >= 0 && n <= o.size {
			o.acked = n
		}
	}
	// A torn last line (crash mid-append) is cut off.
	if err := o.repairTail(); err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
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
	// Find the last newline and truncate after it.
	const chunk = 64 << 10
	end := o.size
	for end > 0 {
		start := max(end-chunk, 0)
		b := make([]byte, end-start)
		if _, err := o.log.ReadAt(b, start); err != nil {
			return fmt.Errorf("check outbox: %w", err)
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			end = start + int64(i) + 1
			break
		}
		end = start
	}
	if err := o.log.Truncate(end); err != nil {
		return fmt.Errorf("repair outbox: %w", err)
	}
	o.size = end
	o.acked = min(o.acked, end)
	return nil
}

// Close closes the log.
func (o *Outbox) Close() error { return o.log.Close() }

// Append writes envelopes of session durably (fsync) before returning. It
// implements the launcher's Outbox.
func (o *Outbox) Append(_ context.Context, session string, envs []protocol.Envelope) error {
	var buf []byte
	for i := range envs {
		raw, err := envs[i].AppendJSON(nil)
		if err != nil {
			return fmt.Errorf("encode envelope: %w", err)
		}
		line, _ := json.Marshal(entry{Session: session, ID: envs[i].ID, Envelope: raw})
		buf = append(append(buf, line...), '\n')
	}
	return o.appendRaw(buf)
}

func (o *Outbox) appendRaw(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.log.Write(buf); err != nil {
		return fmt.Errorf("write outbox: %w", err)
	}
	if err := o.log.Sync(); err != nil {
		return fmt.Errorf("sync outbox: %w", err)
	}
	o.size += int64(len(buf))
	select {
	case o.notify <- struct{}{}:
	default:
	}
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
	end       int64 // log offset after the batch
}

// next reads the oldest unacknowledged run of at most max envelopes of one
// session, or nil when everything is acknowledged.
func (o *Outbox) next(max int) (*batch, error) {
	o.mu.Lock()
	from, size := o.acked, o.size
	o.mu.Unlock()
	if from >= size {
		return nil, nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(o.log, from, size-from), 64<<10)
	b := &batch{end: from}
	for len(b.envelopes) < max {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			break
		}
		var e entry
		if json.Unmarshal(line, &e) != nil {
			// Unreadable line: skip it rather than block the outbox.
			b.end += int64(len(line))
			continue
		}
		if b.session == "" && len(b.envelopes) == 0 {
			b.session = e.Session
		}
		if e.Session != b.session {
			break
		}
		b.envelopes = append(b.envelopes, e.Envelope)
		b.ids = append(b.ids, e.ID)
		b.end += int64(len(line))
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return b, nil
}

// ack records that everything up to end was acknowledged.
func (o *Outbox) ack(end int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if end <= o.acked {
		return nil
	}
	o.acked = end
	if o.acked == o.size && o.size > compactAt {
		if err := o.log.Truncate(0); err != nil {
			return fmt.Errorf("compact outbox: %w", err)
		}
		if err := o.step("compact-log-replaced"); err != nil {
			return err
		}
		o.size, o.acked = 0, 0
	}
	return writeFileAtomic(filepath.Join(o.dir, ackedName), []byte(strconv.FormatInt(o.acked, 10)))
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// step calls the test seam, if any, at a named step.
func (o *Outbox) step(name string) error {
	if o.stop == nil {
		return nil
	}
	return o.stop(name)
}
