// Package durable replaces files so that a crash or a power loss leaves the
// old content or the new, never a mix or nothing: write a temporary file in
// the same folder, fsync it, rename it over the target, fsync the folder.
// Every file ccrelay replaces in place goes through here (the outbox's log
// and acknowledged offset, the scanner's cursor, the command ledger, the
// relay's token file).
package durable

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
)

// File is what Replace needs of the temporary file. *os.File implements
// it; a caller can wrap one (to make writes fail in tests).
type File interface {
	Truncate(size int64) error
	Sync() error
	Close() error
}

// Hooks, when set (tests), are called at each step of Replace. Sync
// replaces the fsync of the temporary file and SyncDir that of the folder,
// so that a test can see that both happen, in order, and make them fail.
type Hooks struct {
	Sync    func(path string, f File) error
	SyncDir func(dir string) error
}

var hooks Hooks

// SetHooks installs h for tests and returns a function that restores the
// previous hooks.
func SetHooks(h Hooks) (restore func()) {
	old := hooks
	hooks = h
	return func() { hooks = old }
}

// Replace durably replaces the file at path with one that write fills.
// open opens (creating) a file for reading and writing; the new content goes
// to path+".tmp" (a leftover of a crash is emptied first), which is
// fsynced, renamed over path, and then the folder is fsynced. Once Replace
// returns a nil error the new file survives power loss. It returns the new
// file, still open, whenever the rename happened, also with an error of the
// folder's fsync (the new content is in place; only its durability is in
// doubt); otherwise the zero F and the temporary file is removed.
func Replace[F File](path string, open func(string) (F, error), write func(F) error) (F, error) {
	var zero F
	tmp := path + ".tmp"
	f, err := open(tmp)
	if err != nil {
		return zero, err
	}
	fail := func(err error) (F, error) {
		f.Close()
		os.Remove(tmp)
		return zero, err
	}
	if err := f.Truncate(0); err != nil {
		return fail(err)
	}
	if err := write(f); err != nil {
		return fail(err)
	}
	if err := syncFile(tmp, f); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	crashpoint.Hit(crashpoint.Renamed)
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return f, fmt.Errorf("sync folder %s: %w", filepath.Dir(path), err)
	}
	return f, nil
}

// WriteFile durably replaces path with data (file mode perm, whatever the
// umask).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	open := func(p string) (*os.File, error) {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, perm)
		if err != nil {
			return nil, err
		}
		if err := f.Chmod(perm); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	f, err := Replace(path, open, func(f *os.File) error {
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

// SyncFile fsyncs f (a file just created or written at path) and its
// folder: the file and its name survive power loss.
func SyncFile(path string, f File) error {
	if err := syncFile(path, f); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

func syncFile(path string, f File) error {
	if hooks.Sync != nil {
		return hooks.Sync(path, f)
	}
	return f.Sync()
}

// SyncDir fsyncs a folder, making a rename or a new name in it durable.
func SyncDir(dir string) error {
	if hooks.SyncDir != nil {
		return hooks.SyncDir(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Publish writes data to a new file at path (mode perm) that appears whole
// or not at all, and never replaces one: if path exists, it fails with an
// error that wraps os.ErrExist, and the caller reads what is there. Several
// processes may race to make the same file (a key made once): one wins.
func Publish(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// A hard link publishes the complete file and fails if one exists.
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}
