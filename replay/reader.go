// Package replay reads a recorded session (a main transcript plus its
// subagent transcripts), merges the files in timestamp order, removes
// duplicate records and feeds them through one mapper. It also renders the
// envelopes as a readable chat.
package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/lines"
)

// DefaultMaxLine is the longest line read; longer lines are skipped with a
// message, so memory stays bounded by this and not by the input.
const DefaultMaxLine = 16 << 20

// Skip is a line that could not be used, with where and why.
type Skip struct {
	File   string
	Line   int
	Reason string
}

func (s Skip) String() string { return fmt.Sprintf("%s:%d: %s", s.File, s.Line, s.Reason) }

// Item is one parsed record and where it came from. Records that are not
// conversation carry only their Type (no Raw).
type Item struct {
	Record *claude.Record
	File   string
	Line   int
	// held is 1 + the record's line number in its file's lineage while it
	// waits for its parent (claude.Lineage.Waits), 0 otherwise.
	held uint64
	// ts orders the record among its file's: its own time, or the time
	// of the record read before it.
	ts int64
}

// fileReader yields the records of one file in order.
type fileReader struct {
	path    string
	f       io.Closer
	lr      lines.Reader
	line    int
	maxLine int
	lastTS  int64
	read    *int64
	skip    func(Skip)
	next    *Item // look-ahead
	done    bool
	// lineage, set for the main transcript, puts its main chain in
	// parent order: a record whose parent is further down waits for it,
	// the records read meanwhile in ahead (claude.Lineage).
	lineage *claude.Lineage
	ahead   []*Item
	parser  claude.LineParser
	// ownLineage is what lineage points to when set: the reader's own,
	// with no allocation of its own.
	ownLineage claude.Lineage
}

func openFile(path string, maxLine int, read *int64, skip func(Skip)) (*fileReader, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, errors.Unwrap(err))
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("open %s: is a directory, not a transcript (give the .jsonl file)", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, errors.Unwrap(err))
	}
	return newFileReader(path, f, f, fi.Size(), maxLine, read, skip), nil
}

// newFileReader reads the records of r, named path; c is closed with it.
func newFileReader(path string, r io.Reader, c io.Closer, size int64, maxLine int, read *int64, skip func(Skip)) *fileReader {
	// Small files get a small buffer: sessions often have many tiny
	// subagent files.
	bufSize := int(min(max(size+1, 4<<10), 256<<10))
	fr := &fileReader{path: path, f: c, maxLine: maxLine, read: read, skip: skip}
	fr.lr.Init(r, bufSize, maxLine)
	return fr
}

func (fr *fileReader) close() { fr.f.Close() }

// advance loads the next record into fr.next: the next usable line, or,
// in the main transcript, the next in parent order. A record whose parent
// is not read yet waits while the next records are read, at most
// claude.MaxHeld of them (conversation records; claude.MaxHeldLines lines
// in all), up to its parent (which then goes in front of
// it with the records between them on its chain) or to the end of the
// file (then it goes on in file order).
func (fr *fileReader) advance() error {
	if fr.lineage == nil {
		return fr.readLine()
	}
	if len(fr.ahead) > 0 {
		fr.next = fr.ahead[0]
		fr.ahead[0] = nil
		fr.ahead = fr.ahead[1:]
	} else if err := fr.readLine(); err != nil {
		return err
	}
	it := fr.next
	if it == nil || it.held == 0 {
		return nil
	}
	n := it.held - 1
	it.held = 0
	held := append([]*Item{it}, fr.ahead...)
	conv := 0
	for _, x := range held {
		if claude.IsConversationType(x.Record.Type) {
			conv++
		}
	}
	for complete := claude.Hoist(fr.lineage, held, n, itemRecord); !complete; {
		if conv >= claude.MaxHeld || len(held) >= claude.MaxHeldLines || fr.done {
			break
		}
		if err := fr.readLine(); err != nil {
			return err
		}
		if fr.next == nil {
			break
		}
		held = append(held, fr.next)
		if claude.IsConversationType(fr.next.Record.Type) {
			conv++
		}
		if fr.lineage.Arrived() {
			complete = claude.Hoist(fr.lineage, held, n, itemRecord)
		}
	}
	fr.next, fr.ahead = held[0], held[1:]
	return nil
}

func itemRecord(it *Item) *claude.Record { return it.Record }

// readLine loads the next usable line of the file into fr.next.
func (fr *fileReader) readLine() error {
	fr.next = nil
	for !fr.done {
		ln, err := fr.lr.Next()
		if err == io.EOF {
			fr.done = true
			return nil
		}
		if err != nil {
			fr.done = true
			return fmt.Errorf("read %s: %w", fr.path, err)
		}
		*fr.read += ln.Size
		fr.line++
		if ln.TooLong {
			fr.skip(Skip{fr.path, fr.line, fmt.Sprintf("line of %s is longer than the %s limit; skipped",
				size(ln.Size), size(int64(fr.maxLine)))})
			continue
		}
		line, complete := ln.Data, ln.Complete
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// The line buffer is reused: non-conversation records (most of the
		// bytes, D14) are recognised by their type alone and keep no copy.
		rec, held, err := fr.parseLine(line)
		if err != nil {
			reason := err.Error()
			if !complete {
				reason = "last line is incomplete (" + reason + ")"
			}
			if errors.Is(err, claude.ErrNotObject) {
				reason = "JSON value is not an object"
			} else if !isText(line) {
				reason = "binary data, not JSON"
			}
			fr.skip(Skip{fr.path, fr.line, reason})
			continue
		}
		if rec.Timestamp > 0 {
			fr.lastTS = rec.Timestamp
		}
		fr.next = &Item{Record: rec, File: fr.path, Line: fr.line, held: held, ts: fr.lastTS}
		return nil
	}
	return nil
}

// parseLine parses a line (claude.ParseLine); in the main transcript it
// notes the line's place in the parent chain, and held is set (1 + its
// line number) for a record that waits for its parent.
func (fr *fileReader) parseLine(line []byte) (rec *claude.Record, held uint64, err error) {
	if fr.lineage == nil {
		rec, err = fr.parser.ParseLine(line)
		return rec, 0, err
	}
	rec, uuid, parent, err := fr.parser.ParseLineLink(line)
	if err != nil {
		return nil, 0, err
	}
	if !claude.IsConversationType(rec.Type) {
		if uuid != nil {
			fr.lineage.AddRaw(uuid, parent)
		}
		return rec, 0, nil
	}
	waits := fr.lineage.Waits(rec)
	if n := fr.lineage.Add(rec.UUID, rec.ParentUUID, true); waits {
		held = n + 1
	}
	return rec, held, nil
}

// ts orders records of a file: records without a timestamp sort with the
// record before them.
func (fr *fileReader) ts() int64 { return fr.next.ts }

func isText(b []byte) bool {
	if len(b) > 512 {
		b = b[:512]
	}
	for _, c := range b {
		if c == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
			return false
		}
	}
	return true
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Merger merges the records of several files in timestamp order. Ties go
// to the file given first, so the main transcript wins over subagent files.
type Merger struct {
	files []*fileReader
	// Read counts the bytes consumed so far.
	Read int64
	err  error
}

// Open opens every file for merging. onSkip is called for each unusable
// line. It fails if any file cannot be opened.
func Open(paths []string, maxLine int, onSkip func(Skip)) (*Merger, error) {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	m := &Merger{}
	for _, p := range paths {
		fr, err := openFile(p, maxLine, &m.Read, onSkip)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.files = append(m.files, fr)
	}
	if err := m.start(); err != nil {
		return nil, err
	}
	return m, nil
}

// start reads the first record of every file. The first is the main
// transcript, read in parent order.
func (m *Merger) start() error {
	if len(m.files) > 0 && !fileOrder {
		m.files[0].lineage = &m.files[0].ownLineage
	}
	for _, fr := range m.files {
		if err := fr.advance(); err != nil {
			m.Close()
			return err
		}
	}
	return nil
}

// fileOrder, set only by BenchmarkParentOrder, reads the main transcript
// in file order, to measure what parent order costs.
var fileOrder bool

// Next returns the next record in merged order, or io.EOF.
func (m *Merger) Next() (*Item, error) {
	var best *fileReader
	for _, fr := range m.files {
		if fr.next == nil {
			continue
		}
		if best == nil || fr.ts() < best.ts() {
			best = fr
		}
	}
	if best == nil {
		return nil, io.EOF
	}
	it := best.next
	if err := best.advance(); err != nil {
		return nil, err
	}
	return it, nil
}

// Close closes every file.
func (m *Merger) Close() {
	for _, fr := range m.files {
		fr.close()
	}
}

// Session is the set of files of one recorded session.
type Session struct {
	ID        string
	Main      string
	Subagents []string
	// Codex marks a Codex rollout (its first line is a session_meta): ID is
	// its thread id, Subagents are the rollouts of its subagent threads.
	Codex bool
}

// Files lists the main transcript first, then the subagent transcripts.
func (s Session) Files() []string { return append([]string{s.Main}, s.Subagents...) }

// FindSession turns the paths given on the command line into a session:
// the first path is the main transcript; when it is the only one, the
// subagent transcripts beside it (<session>/subagents/agent-*.jsonl) are
// added. The session id is the main file's name without .jsonl.
func FindSession(paths []string) (Session, error) {
	if len(paths) == 0 {
		return Session{}, errors.New("no transcript given")
	}
	s := Session{Main: paths[0], Subagents: paths[1:]}
	s.ID = strings.TrimSuffix(filepath.Base(s.Main), filepath.Ext(s.Main))
	if err := checkTranscriptFile(s.Main); err != nil {
		return Session{}, err
	}
	if id, ok := CodexThread(s.Main); ok {
		// A Codex subagent runs in a thread of its own, whose rollout is
		// written beside its parent's (or in a later day's folder): given
		// alone, the rollout is read with those of its subagents.
		s = Session{ID: id, Main: s.Main, Subagents: paths[1:], Codex: true}
		if len(paths) == 1 {
			subs, err := CodexSubagents(CodexSubagentDirs(s.Main), id)
			if err != nil {
				return Session{}, err
			}
			s.Subagents = subs
		}
		return s, nil
	}
	// Subagent transcripts live in <session>/subagents beside the main
	// file; a file that is not a transcript has no such folder.
	sub := filepath.Join(strings.TrimSuffix(s.Main, filepath.Ext(s.Main)), "subagents")
	if fi, err := os.Stat(sub); len(paths) == 1 && err == nil && fi.IsDir() {
		subs, err := claude.SubagentFiles(s.Main)
		if err != nil {
			return Session{}, err
		}
		s.Subagents = subs
	}
	return s, nil
}

// checkTranscriptFile says plainly when path cannot be a transcript: it is
// missing or a folder. (A pipe is fine: replay <(ssh host cat …) works.)
func checkTranscriptFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		if u := errors.Unwrap(err); u != nil {
			err = u
		}
		return fmt.Errorf("open %s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory, not a transcript (give the session's .jsonl file)", path)
	}
	return nil
}
