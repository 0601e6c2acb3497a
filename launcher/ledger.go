package launcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/durable"
)

// MaxLedgerEntries is how many command ids a Ledger remembers: the file is
// rewritten with the newest MaxLedgerEntries once it holds twice as many
// lines. A command is answered or expired by the relay within a day
// (relay.QueuedPromptTTL), long before so many newer ones arrive.
const MaxLedgerEntries = 4096

// Ledger records, durably in the state folder, each command id the CLI
// took and what became of it, so that a command delivered again (the relay
// delivers at least once) is answered with its outcome and never carried
// out twice, even by a restarted CLI.
type Ledger struct {
	path string

	mu      sync.Mutex
	f       *os.File
	entries map[string]ledgerEntry
	order   []string        // ids, oldest first
	lines   int             // lines in the file
	running map[string]bool // begun by this process, not finished
}

type ledgerEntry struct {
	ID      string `json:"id"`
	Status  string `json:"s"` // started | done | rejected
	Message string `json:"m,omitempty"`
	// At is, for a prompt begun, the size of the session's transcript
	// then: Claude's record of the prompt, if it took it, comes after.
	At *int64 `json:"at,omitempty"`
}

// Ledger statuses.
const (
	ledgerStarted  = "started"
	ledgerDone     = "done"
	ledgerRejected = "rejected"
)

// ErrInterrupted is the outcome of a command that the CLI began and did not
// finish before it stopped: it is not carried out again (at most once).
var ErrInterrupted = errors.New("ccrelay stopped while carrying this command out; it is not run again")

// ErrInProgress is the outcome Begin gives a repeat of a command this
// process is still carrying out: its answer follows when it ends.
var ErrInProgress = errors.New("the command is being carried out")

// OpenLedger opens (or creates) the ledger at path.
func OpenLedger(path string) (*Ledger, error) {
	l := &Ledger{path: path, entries: map[string]ledgerEntry{}, running: map[string]bool{}}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			l.lines++
			var e ledgerEntry
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.ID == "" {
				continue // a line cut by a crash
			}
			l.put(e)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read the command ledger %s: %w", path, err)
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("open the command ledger: %w", err)
	}
	if err := l.compact(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Ledger) put(e ledgerEntry) {
	if _, ok := l.entries[e.ID]; !ok {
		l.order = append(l.order, e.ID)
	}
	l.entries[e.ID] = e
	for len(l.order) > MaxLedgerEntries {
		delete(l.entries, l.order[0])
		l.order = l.order[1:]
	}
}

// compact rewrites the file with the entries remembered, and opens it for
// appending.
func (l *Ledger) compact() error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	tmp := l.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write the command ledger: %w", err)
	}
	w := bufio.NewWriter(f)
	for _, id := range l.order {
		b, _ := json.Marshal(l.entries[id])
		w.Write(append(b, '\n'))
	}
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("write the command ledger: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("write the command ledger: %w", err)
	}
	if err := durable.SyncDir(filepath.Dir(l.path)); err != nil {
		return fmt.Errorf("write the command ledger: %w", err)
	}
	l.lines = len(l.order)
	l.f, err = os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the command ledger: %w", err)
	}
	return nil
}

// record appends e durably. Called with mu held.
func (l *Ledger) record(e ledgerEntry) error {
	b, _ := json.Marshal(e)
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("record command %s: %w", e.ID, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("record command %s: %w", e.ID, err)
	}
	l.put(e)
	l.lines++
	if l.lines >= 2*MaxLedgerEntries {
		return l.compact()
	}
	return nil
}

// Begin records that the command id is being carried out, and returns
// fresh true; for an id seen before it returns fresh false and the outcome
// to answer again with (nil: done; ErrInterrupted for a command begun and
// never finished).
func (l *Ledger) Begin(id string) (fresh bool, outcome error, err error) {
	return l.begin(id, nil)
}

// BeginPrompt is Begin for a prompt, recording at, the size of the
// session's transcript now: if this process ends before the prompt's
// outcome, the next one tells from the transcript past at whether Claude
// took it (StartedAt).
func (l *Ledger) BeginPrompt(id string, at int64) (fresh bool, outcome error, err error) {
	return l.begin(id, &at)
}

// StartedAt is where the session's transcript stood when the prompt id
// was begun (BeginPrompt), for a prompt begun and never finished.
func (l *Ledger) StartedAt(id string) (at int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, found := l.entries[id]
	if !found || e.Status != ledgerStarted || e.At == nil {
		return 0, false
	}
	return *e.At, true
}

func (l *Ledger) begin(id string, at *int64) (fresh bool, outcome error, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[id]; ok {
		switch e.Status {
		case ledgerDone:
			return false, nil, nil
		case ledgerRejected:
			return false, errors.New(e.Message), nil
		case ledgerStarted:
			if l.running[id] {
				return false, ErrInProgress, nil
			}
			return false, ErrInterrupted, nil
		default:
			return false, ErrInterrupted, nil
		}
	}
	if err := l.record(ledgerEntry{ID: id, Status: ledgerStarted, At: at}); err != nil {
		return false, nil, err
	}
	crashpoint.Hit(crashpoint.LedgerBegun)
	l.running[id] = true
	return true, nil, nil
}

// Finish records the outcome of a command begun with Begin: outcome nil
// is done, otherwise rejected with its text.
func (l *Ledger) Finish(id string, outcome error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.running, id)
	e := ledgerEntry{ID: id, Status: ledgerDone}
	if outcome != nil {
		e.Status, e.Message = ledgerRejected, outcome.Error()
	}
	if err := l.record(e); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.LedgerFinished)
	return nil
}

// Close closes the file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
