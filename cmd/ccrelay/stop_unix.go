//go:build unix

package main

import (
	"os"
	"syscall"
)

// askToStop asks a ccrelay to end (SIGTERM): it stops its Claude, sends
// what is left, and exits.
func askToStop(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
