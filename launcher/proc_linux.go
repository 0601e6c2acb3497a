package launcher

import "syscall"

// pdeathsig is whether Claude gets the parent-death signal: tests turn it
// off to check the path other Unix systems rely on (proc_unix.go).
var pdeathsig = true

// childAttr makes the kernel kill Claude if ccrelay dies, even by SIGKILL.
// Claude stays in ccrelay's process group, so the terminal treats it as the
// foreground program it is.
func childAttr() *syscall.SysProcAttr {
	if !pdeathsig {
		return &syscall.SysProcAttr{}
	}
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
