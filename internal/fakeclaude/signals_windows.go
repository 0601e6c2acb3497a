package main

import (
	"os"
	"os/signal"
	"syscall"
)

// watchSignals returns the channel of the console events that end the
// fake Claude.
func watchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	return sigs
}
