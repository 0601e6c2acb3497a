package replay

import (
	"bytes"
	"os"
	"runtime/debug"
	"strconv"
)

// PeakRSS returns the process's peak resident set size in bytes (VmHWM on
// Linux), or 0 where it cannot be read.
func PeakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// MemoryLimit is the soft limit a replay sets on the Go runtime's memory
// (LimitMemory): the heap it needs is a few megabytes at any input size
// (the keys of the records read, about 3 MB per GB of transcript, and the
// longest line), and without a limit the collector lets the heap grow to
// twice that and more between collections.
const MemoryLimit = 16 << 20

// LimitMemory sets the runtime's soft memory limit to MemoryLimit unless
// GOMEMLIMIT sets one, and returns the function that restores the limit
// before. The limit is soft: a replay that needs more (a line of many
// megabytes) gets it, at the cost of more collections meanwhile.
//
// Under the limit the collector runs on the limit alone, unless GOGC says
// otherwise: the proportional collector (GOGC=100) starts at a 4 MB heap
// and collects each time the heap doubles, three or more times in a 3 MB
// session whose live heap stays under 2 MB, a tenth of the process's time;
// the limit collects once there, and as often as before on a large input,
// where the heap reaches the limit anyway.
func LimitMemory() (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(MemoryLimit)
	if os.Getenv("GOGC") != "" {
		return func() { debug.SetMemoryLimit(prev) }
	}
	pct := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(prev)
	}
}
