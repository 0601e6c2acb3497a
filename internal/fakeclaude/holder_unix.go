//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// holdOutput starts a process of its own session that holds this Claude's
// stdout and stderr for secs seconds, as a command Claude runs can (for
// $FAKE_CLAUDE_OUTPUT_HOLDER): Claude's output does not end when it dies.
func holdOutput(secs string) {
	cmd := exec.Command("sleep", secs)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	_ = cmd.Start() // never waited: it outlives this process
}
