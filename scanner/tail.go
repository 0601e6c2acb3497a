// Package scanner watches the transcript files of a Claude Code session and
// reads what was appended to them, incrementally (ARCHITECTURE principle 3).
package scanner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ccrelay/ccrelay/internal/lines"
)

// DefaultMaxLine bounds the lines a Tail keeps in memory.
const DefaultMaxLine = 16 << 20

// FileID identifies a file independently of its name (device and inode on
// Unix, volume serial number and file index on Windows: fileid_*.go), so a
// file replaced under the same name is noticed. The zero FileID means
// unknown.
type FileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// Line is one complete line read from a file.
type Line struct {
	Data []byte // without the newline; nil when TooLong; valid during the callback
	Num  int    // 1-based line number in the file
	// Next is the offset just past this line's newline: the cursor to
	// commit once the line's output is durable.
	Next int64
	// TooLong reports a line longer than the Tail's MaxLine, consumed but
	// not kept.
	TooLong bool
	Size    int64 // the line's length in bytes
	Start   int64 // offset of the line's first byte
	// Partial marks a last line without a newline, read only when the
	// Tail is Final.
	Partial bool
	// Reread marks a line read again from the start of a file that was
	// truncated or replaced during this call.
	Reread bool
}

// Tail reads the complete lines appended to one file since its position.
// The position is only in memory; what is committed durably is the caller's
// business (the Line.Next of the last line whose output is stored).
type Tail struct {
	Path    string
	MaxLine int
	// Final means the writer has stopped: a last line without a newline
	// is read too (as replay reads it), and the position moves past it.
	Final bool
	// Through is an offset up to which a last line without a newline is
	// read even when not Final: it was read before (a replay).
	Through int64

	pos   int64 // offset of the next unread byte (start of a partial line)
	line  int   // number of the last line read
	id    FileID
	guard []byte // the bytes just before pos, to notice a rewritten file
}

// guardSize is how many bytes before the position are checked to notice a
// file rewritten in place to the same or a greater size.
const guardSize = 64

// Position is where a Tail stands: enough to resume after a restart.
type Position struct {
	Offset int64  `json:"offset"`
	Line   int    `json:"line"`
	ID     FileID `json:"id"`
	Guard  []byte `json:"guard,omitempty"`
}

// NewTail returns a Tail positioned at p (the zero Position: the start).
func NewTail(path string, p Position) *Tail {
	return &Tail{Path: path, MaxLine: DefaultMaxLine, pos: p.Offset, line: p.Line, id: p.ID, guard: p.Guard}
}

// Position returns the current position (after the last complete line read).
func (t *Tail) Position() Position {
	return Position{Offset: t.pos, Line: t.line, ID: t.id, Guard: bytes.Clone(t.guard)}
}

// ErrReset is passed to ReadNew's callback as the reason when a file was
// truncated or replaced and is read again from the start.
var ErrReset = errors.New("file truncated or replaced; reading it again from the start")

// ReadNew reads every complete line appended since the last call and calls
// fn for each, in order. A partial last line (no newline yet) is left for a
// later call, unless the Tail is Final. When the file shrank below the position or is another file
// under the same name, it is read from the start and reset is true (rely on
// dedupe for lines seen before). A missing file returns an error wrapping
// os.ErrNotExist. If fn fails, reading stops and the position stays before
// that line.
func (t *Tail) ReadNew(fn func(Line) error) (reset bool, err error) {
	f, err := OpenRegular(t.Path)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", t.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", t.Path, err)
	}
	id := fileID(f, fi)
	if !t.holds(f, fi) {
		t.pos, t.line, t.guard, reset = 0, 0, nil, true
	}
	t.id = id
	if fi.Size() == t.pos {
		return reset, nil
	}
	if _, err := f.Seek(t.pos, io.SeekStart); err != nil {
		return reset, fmt.Errorf("seek %s: %w", t.Path, err)
	}
	max := t.MaxLine
	if max <= 0 {
		max = DefaultMaxLine
	}
	lr := lines.NewReader(f, 64<<10, max)
	for {
		ln, err := lr.Next()
		if err == io.EOF || (err == nil && !ln.Complete && !t.Final && t.pos+ln.Size > t.Through) {
			return reset, nil // a partial line waits for its newline
		}
		if err != nil {
			return reset, fmt.Errorf("read %s: %w", t.Path, err)
		}
		l := Line{Data: ln.Data, Num: t.line + 1, Next: t.pos + ln.Size, Size: ln.Size - 1, TooLong: ln.TooLong,
			Start: t.pos, Partial: !ln.Complete, Reread: reset}
		if l.Partial {
			l.Size = ln.Size
		}
		if err := fn(l); err != nil {
			return reset, err
		}
		t.pos, t.line = l.Next, l.Num
		t.keepGuard(ln.Data, ln.Size, l.Partial)
	}
}

// holds reports whether the position still belongs to the open file f: the
// same file (device and inode), not shorter, and the same bytes before it.
func (t *Tail) holds(f *os.File, fi os.FileInfo) bool {
	id := fileID(f, fi)
	return (t.id == FileID{} || id == t.id) && fi.Size() >= t.pos && t.guardHolds(f)
}

// Verify reports whether the file at Path is still the one the position was
// taken in (see holds), without reading it. A missing file returns an error
// wrapping os.ErrNotExist.
func (t *Tail) Verify() (bool, error) {
	f, err := OpenRegular(t.Path)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", t.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", t.Path, err)
	}
	return t.holds(f, fi), nil
}

// Rewind moves the Tail back to the start of the same file (its identity is
// kept), to read again what lies before the position.
func (t *Tail) Rewind() { t.pos, t.line, t.guard = 0, 0, nil }

// guardHolds reports whether the bytes before the position are still those
// that were read there.
func (t *Tail) guardHolds(f *os.File) bool {
	if len(t.guard) == 0 || t.pos < int64(len(t.guard)) {
		return true
	}
	buf := make([]byte, len(t.guard))
	if _, err := f.ReadAt(buf, t.pos-int64(len(buf))); err != nil {
		return false
	}
	return bytes.Equal(buf, t.guard)
}

// keepGuard remembers the last bytes of the line just consumed (its data
// plus the newline) as the guard for the new position.
func (t *Tail) keepGuard(data []byte, size int64, partial bool) {
	if partial && data != nil && int64(len(data)) == size {
		t.guard = append(t.guard[:0], data[max(0, len(data)-guardSize):]...)
		return
	}
	if data == nil || int64(len(data))+1 != size {
		// A too-long line or a CRLF ending: the exact bytes are not at hand;
		// check nothing rather than something wrong.
		t.guard = nil
		return
	}
	g := append(t.guard[:0], data[max(0, len(data)+1-guardSize):]...)
	t.guard = append(g, '\n')
}

// Equal reports whether p and q are the same position.
func (p Position) Equal(q Position) bool {
	return p.Offset == q.Offset && p.Line == q.Line && p.ID == q.ID && bytes.Equal(p.Guard, q.Guard)
}

// ErrNotRegular is the error of opening a transcript or rollout that is
// not a regular file (a named pipe, a device, a folder).
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path for reading if it is a regular file (a link to
// one included), and fails at once otherwise: a named pipe put in a
// transcript's or rollout's place would make a plain open wait for a
// writer forever.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return f, nil
}
