//go:build unix

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// watchSignals returns the channel of the signals that end the fake
// Claude (FAKE_CLAUDE_SIGLOG logs others, FAKE_CLAUDE_IGNORE_TERM makes it
// deaf to SIGTERM).
func watchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 1)
	if p := os.Getenv("FAKE_CLAUDE_SIGLOG"); p != "" {
		// Record the signals that reach Claude, without acting on them
		// (SIGTERM still ends it).
		logged := make(chan os.Signal, 8)
		signal.Notify(logged, syscall.SIGINT, syscall.SIGHUP, syscall.SIGWINCH)
		go func() {
			for s := range logged {
				f, _ := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				fmt.Fprintln(f, s.(syscall.Signal).String())
				f.Close()
			}
		}()
		signal.Notify(sigs, syscall.SIGTERM)
	} else if os.Getenv("FAKE_CLAUDE_IGNORE_TERM") != "" {
		// A Claude that does not stop when asked.
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGHUP)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	}
	return sigs
}
