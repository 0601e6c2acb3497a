//go:build unix

package scanner

import (
	"os"
	"syscall"
)

// openFlags opens without waiting: opening a named pipe for reading would
// otherwise wait for a writer.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
