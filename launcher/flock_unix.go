//go:build unix

package launcher

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive lock on f, waiting for it (wait) or failing
// with errLocked when another process holds it.
func lockFile(f *os.File, wait bool) error {
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return errLocked
		default:
			return err
		}
	}
}

func unlockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// signalName is a signal's name as a shell says it (SIGKILL).
func signalName(sig syscall.Signal) string { return unix.SignalName(sig) }

// openNoFollow makes an open refuse a symbolic link as the last element
// of the path (a lock file another user planted as a link elsewhere).
const openNoFollow = unix.O_NOFOLLOW
