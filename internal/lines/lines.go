// Package lines reads newline-terminated lines with a bound on the memory a
// line may take: longer lines are consumed and reported, not kept.
package lines

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Line is one line read.
type Line struct {
	// Data is the line without its line ending; nil when TooLong. It is
	// valid until the next call to Next.
	Data []byte
	// Size is the number of bytes consumed, line ending included.
	Size int64
	// TooLong reports a line longer than the reader's limit.
	TooLong bool
	// Complete is false for a last line that has no newline (yet).
	Complete bool
}

// Reader reads lines from r, keeping at most max bytes of one line.
type Reader struct {
	r       bufio.Reader
	max     int
	scratch []byte
}

// NewReader returns a Reader over r with a read buffer of bufSize bytes and
// a line limit of max bytes.
func NewReader(r io.Reader, bufSize, max int) *Reader {
	lr := new(Reader)
	lr.Init(r, bufSize, max)
	return lr
}

// Init makes lr, not yet used, what NewReader returns: for a Reader held in
// a struct of the caller's, without an allocation of its own.
func (lr *Reader) Init(r io.Reader, bufSize, max int) {
	*lr = Reader{r: *bufio.NewReaderSize(r, bufSize), max: max}
}

// Next returns the next line, or io.EOF when nothing is left. A last line
// without a newline is returned with Complete false.
func (lr *Reader) Next() (Line, error) {
	chunk, err := lr.r.ReadSlice('\n')
	if err == nil && len(chunk) <= lr.max+1 {
		// The whole line is in the read buffer: it is returned from there
		// (valid until the next read, as the scratch copy would be).
		return Line{Data: bytes.TrimRight(chunk, "\r\n"), Size: int64(len(chunk)), Complete: true}, nil
	}
	buf := lr.scratch[:0]
	var l Line
	for first := true; ; first = false {
		if !first {
			chunk, err = lr.r.ReadSlice('\n')
		}
		l.Size += int64(len(chunk))
		if !l.TooLong && len(buf)+len(chunk) > lr.max+1 {
			l.TooLong, buf = true, nil
		}
		if !l.TooLong {
			buf = append(buf, chunk...)
		}
		switch {
		case err == nil:
			l.Complete = true
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if l.Size == 0 {
				return Line{}, io.EOF
			}
		default:
			return Line{}, err
		}
		if buf != nil {
			lr.scratch = buf[:0]
			l.Data = bytes.TrimRight(buf, "\r\n")
		}
		return l, nil
	}
}
