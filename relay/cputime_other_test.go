//go:build !unix

package relay

import (
	"syscall"
	"time"
)

// cpuTime is 0 where the process's CPU time is not read.
func cpuTime() time.Duration { return 0 }

// sessionApart is nil where sessions are not made apart.
func sessionApart() *syscall.SysProcAttr { return nil }
