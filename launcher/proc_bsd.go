//go:build unix && !linux

package launcher

import "syscall"

// childAttr has no parent-death signal to ask for outside Linux. What
// stops Claude on macOS when ccrelay is killed (SIGKILL included) is what
// it is connected to (proc_unix.go): in remote mode its stdin, a pipe
// whose only writer was ccrelay, ends; in local mode the terminal is taken
// from it. Claude stays in ccrelay's process group, so the terminal treats
// it as the foreground program it is.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
