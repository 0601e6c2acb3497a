package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/internal/logfile"
)

// MaxStateLogBytes bounds the state folder's ccrelay.log, which every
// ccrelay in local mode, the follow hook and the followers write at once:
// past it, the log becomes ccrelay.log.1 (replacing the one before) and a
// new one starts.
const MaxStateLogBytes = 8 << 20

// stateLog opens the state folder's ccrelay.log (shared with the other
// ccrelay processes of the state folder).
func stateLog(state string) (*logfile.File, error) {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return logfile.OpenShared(filepath.Join(state, "ccrelay.log"), MaxStateLogBytes)
}

// StderrLogEnv names the file a service manager writes ccrelay's stderr
// to (launchd's StandardErrorPath: it appends to it and never bounds it).
// At each start ccrelay bounds it to MaxStderrLogBytes (logfile.Trim).
const StderrLogEnv = "CCRELAY_STDERR_LOG"

// MaxStderrLogBytes bounds the file StderrLogEnv names (as --log-file-max
// does the relay's log, which launchd's relay writes there too).
const MaxStderrLogBytes = 8 << 20

// trimStderrLog bounds the file StderrLogEnv names, if set.
func trimStderrLog() {
	if p := os.Getenv(StderrLogEnv); p != "" {
		if err := logfile.Trim(p, MaxStderrLogBytes); err != nil {
			fmt.Fprintln(os.Stderr, "ccrelay:", err)
		}
	}
}
