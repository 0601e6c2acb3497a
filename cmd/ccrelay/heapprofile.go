package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
)

// HeapProfileEnv names a path prefix: when set, ccrelay writes a heap
// profile of itself to <prefix>.<n>.heap each time it gets SIGUSR1 (not on
// Windows) and to <prefix>.exit.heap as it exits. Off unless set; it is for
// measuring memory over long runs (go tool pprof reads the files).
const HeapProfileEnv = "CCRELAY_HEAP_PROFILE"

// heapProfiles counts the profiles written on a signal.
var heapProfiles atomic.Int64

// writeHeapProfile writes the heap profile (after a collection, so that it
// shows what is live) to path, whole once it is there (written beside it,
// then renamed).
func writeHeapProfile(path string) error {
	runtime.GC()
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return nil
}

// startHeapProfiles writes heap profiles on a signal until ctx ends, when
// HeapProfileEnv is set; the function it returns writes the one at exit.
func startHeapProfiles(ctx context.Context) (atExit func()) {
	prefix := os.Getenv(HeapProfileEnv)
	if prefix == "" {
		return func() {}
	}
	stop := onProfileSignal(ctx, func() {
		p := fmt.Sprintf("%s.%d.heap", prefix, heapProfiles.Add(1))
		if err := writeHeapProfile(p); err != nil {
			fmt.Fprintln(os.Stderr, "ccrelay:", err)
		}
	})
	return func() {
		stop()
		if err := writeHeapProfile(prefix + ".exit.heap"); err != nil {
			fmt.Fprintln(os.Stderr, "ccrelay:", err)
		}
	}
}
