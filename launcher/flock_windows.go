package launcher

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// lockFile takes an exclusive lock on f's first byte, waiting for it
// (wait) or failing with errLocked when another process holds it.
func lockFile(f *os.File, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errLocked
	}
	return err
}

func unlockFile(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, new(windows.Overlapped))
}

// signalName names a signal (Windows has no signal names of its own).
func signalName(sig syscall.Signal) string { return sig.String() }

// openNoFollow: Windows has no O_NOFOLLOW; a state folder there is the
// user's own.
const openNoFollow = 0
