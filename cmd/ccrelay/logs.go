package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/logfile"
	"github.com/ccrelay/ccrelay/launcher"
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

// codexFolderState is where ccrelay keeps the state of the Codex runs in
// the folder cwd.
func codexFolderState(state, cwd string) string {
	return filepath.Join(state, "codex", claude.EscapeProjectPath(cwd))
}

// openCodexRun claims a state slot of a Codex run in the folder cwd and
// opens the state log (stateLog) with a logger writing to it; the caller
// releases the slot and closes the log.
func openCodexRun(state, cwd string) (*launcher.RunDir, *logfile.File, *slog.Logger, error) {
	slot, err := launcher.ClaimRunDir(codexFolderState(state, cwd))
	if err != nil {
		return nil, nil, nil, err
	}
	logFile, err := stateLog(state)
	if err != nil {
		slot.Release()
		return nil, nil, nil, err
	}
	return slot, logFile, slog.New(slog.NewTextHandler(logFile, nil)), nil
}
