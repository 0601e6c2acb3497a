package scanner

import (
	"time"

	"golang.org/x/sys/windows"
)

// cpuTime is the CPU time this process used so far (user and kernel).
func cpuTime() time.Duration {
	var created, exited, kernel, user windows.Filetime
	windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user)
	// Filetimes count 100 ns; Nanoseconds would count from 1601.
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
