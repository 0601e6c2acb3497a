package main

import (
	"errors"
	"syscall"

	"golang.org/x/sys/windows"
)

// addrInUse says whether err is a listen address already in use: Windows
// sockets say WSAEADDRINUSE, which syscall.EADDRINUSE does not match.
func addrInUse(err error) bool {
	return errors.Is(err, windows.WSAEADDRINUSE) || errors.Is(err, syscall.EADDRINUSE)
}
