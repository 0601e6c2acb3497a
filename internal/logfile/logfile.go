// Package logfile is a log file of bounded size: past its limit the file
// becomes NAME.1 (replacing the one before) and a new NAME starts, so a
// process that runs for months keeps at most twice the limit on disk.
package logfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// File is an append-only log file that turns over at a size. It is safe
// for concurrent use.
type File struct {
	mu    sync.Mutex
	path  string
	limit int64
	f     *os.File
	size  int64
	next  int64 // the size at which to turn over next
	// shared: other processes write the same log (OpenShared).
	shared bool
}

// Open opens (creating, mode 0600) the log at path, turning it over first
// if it is already at limit bytes or more.
func Open(path string, limit int64) (*File, error) {
	return openLog(&File{path: path, limit: limit, next: limit})
}

// OpenShared is Open for a log that several processes write at once,
// each through its own OpenShared: its size is the file's, whoever wrote
// it, and before each write a File that finds the log turned over by
// another goes on in the new one.
func OpenShared(path string, limit int64) (*File, error) {
	return openLog(&File{path: path, limit: limit, next: limit, shared: true})
}

// openLog opens l's file, turning it over first if it is already at its
// limit or more.
func openLog(l *File) (*File, error) {
	if err := l.open(); err != nil {
		return nil, err
	}
	if l.size >= l.limit {
		if err := l.turn(); err != nil {
			l.f.Close()
			return nil, err
		}
	}
	return l, nil
}

// current reports whether the log's path still names the file l writes.
func (l *File) current() bool {
	at, err := os.Stat(l.path)
	if err != nil {
		return false
	}
	mine, err := l.f.Stat()
	return err == nil && os.SameFile(at, mine)
}

func (l *File) open() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log: %w", err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// turn moves the log to path.1 and starts an empty one (l.mu held).
func (l *File) turn() error {
	l.f.Close()
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		// Keep logging to the file as it is rather than not at all, and
		// try again an eighth of the limit later (Windows refuses while a
		// session started earlier holds the file open).
		if oerr := l.open(); oerr != nil {
			return oerr
		}
		l.next = l.size + max(l.limit/8, 1)
		return fmt.Errorf("turn log over: %w", err)
	}
	l.next = l.limit
	return l.open()
}

// Write appends p; a write that brings the file to its limit turns it over
// after it (a line is never split between two files).
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shared && !l.current() {
		// Another process turned it over: on in the new one.
		l.f.Close()
		if err := l.open(); err != nil {
			return 0, err
		}
		l.next = l.limit
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	if l.shared {
		if fi, serr := l.f.Stat(); serr == nil {
			l.size = fi.Size()
		}
	}
	if err == nil && l.size >= l.next {
		err = l.turn()
	}
	return n, err
}

// Close closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// Hold calls fn with the file being written now, which stays open while fn
// runs (a child process started in fn writes to it directly, and goes on
// writing to it, as NAME.1, after a turn over).
func (l *File) Hold(fn func(*os.File) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fn(l.f)
}

// Trim bounds a log that another process writes through a file it keeps
// open (launchd's StandardErrorPath): if the file at path holds limit bytes
// or more, its last limit bytes move to path.1 (replacing the one before)
// and it is emptied in place, where that process, appending, goes on. A
// missing file is left missing.
func Trim(path string, limit int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	if fi.Size() < limit {
		return nil
	}
	if _, err := f.Seek(fi.Size()-limit, io.SeekStart); err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	old, err := os.OpenFile(path+".1", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	if _, err := io.Copy(old, io.LimitReader(f, limit)); err != nil {
		old.Close()
		return fmt.Errorf("trim log: %w", err)
	}
	if err := old.Close(); err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	return nil
}
