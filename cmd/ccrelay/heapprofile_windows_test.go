package main

import (
	"os"
	"testing"
)

// heapProfile: Windows has no SIGUSR1 to ask a process for one.
func heapProfile(b *testing.B, _ *os.Process, path string) {
	b.Helper()
	b.Fatalf("no heap profile %s: Windows has no SIGUSR1 (run the timed soak elsewhere)", path)
}
