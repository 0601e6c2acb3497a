//go:build unix

package relay

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process used so far (user and system), or
// 0 where it cannot be read.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sessionApart makes a child the leader of a session of its own, so that
// the kernel's autogroup scheduling gives it a share apart from this
// process's.
func sessionApart() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
