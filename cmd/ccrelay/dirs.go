package main

import (
	"fmt"
	"os"

	"github.com/ccrelay/ccrelay/internal/dirs"
)

// platformDir is this platform's folder of a kind (internal/dirs has the
// rules), for the default of a --state or --data flag.
func platformDir(rule func(dirs.Env) (string, error), what string) (string, error) {
	home, _ := os.UserHomeDir() // "" is handled: a rule that needs it says so
	d, err := rule(dirs.Current(home))
	if err != nil {
		return "", fmt.Errorf("find the %s folder: %w", what, err)
	}
	return d, nil
}
