package launcher

import (
	"context"
	"os"
)

// watchKeys signals when space is pressed twice in a row on f. It polls
// (readKeys, keys_unix.go and keys_windows.go), so it stops reading as soon
// as ctx ends: local Claude gets the terminal back with no key taken from
// it.
func watchKeys(ctx context.Context, f *os.File) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		spaces := 0
		readKeys(ctx, f, func(keys []byte) bool {
			for _, b := range keys {
				if b == ' ' {
					spaces++
				} else {
					spaces = 0
				}
				if spaces >= 2 {
					select {
					case out <- struct{}{}:
					case <-ctx.Done():
					}
					return false
				}
			}
			return true
		})
	}()
	return out
}

// keyPoll is how long one wait for a key lasts before ctx is looked at
// again.
const keyPoll = 100 // milliseconds
