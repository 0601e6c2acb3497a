// Package replay reads a recorded session (a main transcript plus its
// subagent transcripts), merges the files in timestamp order, removes
// duplicate records and feeds them through one mapper. It also renders the
// envelopes as a readable chat.
package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccrelay/ccrelay/claude"
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
}

// fileReader yields the records of one file in order.
type fileReader struct {
	path    string
	f       *os.File
	r       *bufio.Reader
	line    int
	maxLine int
	lastTS  int64
	read    *int64
	skip    func(Skip)
	next    *Item // look-ahead
	done    bool
	// scratch is reused for every line; only conversation records keep a
	// copy of theirs.
	scratch []byte
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
	// Small files get a small buffer: sessions often have many tiny
	// subagent files.
	bufSize := int(min(max(fi.Size()+1, 4<<10), 256<<10))
	return &fileReader{path: path, f: f, r: bufio.NewReaderSize(f, bufSize), maxLine: maxLine,
		read: read, skip: skip}, nil
}

func (fr *fileReader) close() { fr.f.Close() }

// readLine returns the next line without its newline. A line longer than
// maxLine is consumed and reported as too long. complete is false for a last
// line that has no newline.
func (fr *fileReader) readLine() (line []byte, tooLong int64, complete bool, err error) {
	buf := fr.scratch[:0]
	defer func() { fr.scratch = buf[:0] }()
	var n int64
	for {
		chunk, e := fr.r.ReadSlice('\n')
		n += int64(len(chunk))
		*fr.read += int64(len(chunk))
		if tooLong == 0 && int64(len(buf))+int64(len(chunk)) > int64(fr.maxLine)+1 {
			tooLong = 1
			buf = nil
		}
		if tooLong == 0 {
			buf = append(buf, chunk...)
		}
		switch {
		case e == nil:
			if tooLong != 0 {
				return nil, n, true, nil
			}
			return bytes.TrimRight(buf, "\r\n"), 0, true, nil
		case errors.Is(e, bufio.ErrBufferFull):
			continue
		case errors.Is(e, io.EOF):
			if n == 0 {
				return nil, 0, false, io.EOF
			}
			if tooLong != 0 {
				return nil, n, false, nil
			}
			return buf, 0, false, nil
		default:
			return nil, 0, false, fmt.Errorf("read %s: %w", fr.path, e)
		}
	}
}

// advance loads the next usable record into fr.next.
func (fr *fileReader) advance() error {
	fr.next = nil
	for !fr.done {
		line, tooLong, complete, err := fr.readLine()
		if err == io.EOF {
			fr.done = true
			return nil
		}
		if err != nil {
			fr.done = true
			return err
		}
		fr.line++
		if tooLong > 0 {
			fr.skip(Skip{fr.path, fr.line, fmt.Sprintf("line of %s is longer than the %s limit; skipped",
				size(tooLong), size(int64(fr.maxLine)))})
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// Non-conversation records (most of the bytes, D14) are recognised by
		// their type alone and keep no copy of the line.
		rec, err := parseLine(line)
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
		// The line buffer is reused only through a fresh allocation, so
		// the record may keep it.
		if rec.Timestamp > 0 {
			fr.lastTS = rec.Timestamp
		}
		fr.next = &Item{Record: rec, File: fr.path, Line: fr.line}
		return nil
	}
	return nil
}

func parseLine(line []byte) (*claude.Record, error) {
	typ, err := claude.PeekType(line)
	if err != nil {
		return nil, err
	}
	if !claude.IsConversationType(typ) {
		return &claude.Record{Type: typ}, nil
	}
	return claude.Parse(bytes.Clone(line))
}

// ts orders records of a file: records without a timestamp sort with the
// record before them.
func (fr *fileReader) ts() int64 {
	if fr.next.Record.Timestamp > 0 {
		return fr.next.Record.Timestamp
	}
	return fr.lastTS
}

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
	for _, fr := range m.files {
		if err := fr.advance(); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

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
	if len(paths) == 1 {
		subs, err := claude.SubagentFiles(s.Main)
		if err != nil {
			return Session{}, err
		}
		s.Subagents = subs
	}
	return s, nil
}
