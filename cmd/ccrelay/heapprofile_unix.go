//go:build unix

package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// onProfileSignal calls write at each SIGUSR1 until ctx ends or the
// function it returns is called (which waits for a write under way).
func onProfileSignal(ctx context.Context, write func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				write()
			}
		}
	})
	return func() {
		signal.Stop(ch)
		cancel()
		wg.Wait()
	}
}
