//go:build !unix

package main

import (
	"os"
	"os/exec"
)

func ownGroup(cmd *exec.Cmd) {}

// interruptGroup interrupts go test (which stops the test programs it runs).
func interruptGroup(cmd *exec.Cmd) { cmd.Process.Signal(os.Interrupt) }
