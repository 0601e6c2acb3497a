//go:build unix

package testutil

import "syscall"

// ProcessAlive reports whether a process with this pid exists (a zombie
// included: see Exited).
func ProcessAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }
