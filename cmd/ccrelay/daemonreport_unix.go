//go:build unix

package main

import (
	"os"
	"syscall"
)

// closeOnExec keeps f from the programs this process starts.
func closeOnExec(f *os.File) { syscall.CloseOnExec(int(f.Fd())) }
