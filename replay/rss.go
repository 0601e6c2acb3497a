package replay

import (
	"bytes"
	"os"
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
