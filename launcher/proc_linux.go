package launcher

import "syscall"

// childAttr makes the kernel kill Claude if ccrelay dies, even by SIGKILL.
// Claude stays in ccrelay's process group, so the terminal treats it as the
// foreground program it is.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
