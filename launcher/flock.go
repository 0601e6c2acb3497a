package launcher

import (
	"errors"
	"os"
)

// errLocked: another process holds the lock (lockFile without waiting).
var errLocked = errors.New("locked by another process")

// ErrLocked is TryLock's error when another process holds the lock.
var ErrLocked = errLocked

// TryLock takes the lock of the file at path (made 0600 if missing)
// without waiting: ErrLocked when another process holds it. Closing the
// file releases it; so does the process's end, however it ends.
func TryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
