package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/launcher"
)

// runningDir holds a lock file per session a daemon runs (<session>.lock,
// held by that session's ccrelay, with its pid): how ccrelay attach finds
// and stops it.
func runningDir(state string) string { return filepath.Join(state, "daemon", "running") }

// holdRunning takes the lock of session's file in runningDir and writes
// this process's pid in it; release removes it.
func holdRunning(state, session string) (release func(), err error) {
	dir := runningDir(state)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, session+".lock")
	f, err := launcher.TryLock(path)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", session, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { os.Remove(path); f.Close() }, nil
}

// attachWait bounds how long ccrelay attach waits for the daemon's session
// to end before Claude starts in the terminal.
const attachWait = 30 * time.Second

func newAttachCmd() *cobra.Command {
	var lf localFlags
	cmd := &cobra.Command{
		Use:   "attach SESSION [flags] [-- claude args]",
		Short: "Take over in this terminal a session started from the app: its daemon stops it, and Claude resumes it here",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			session := args[0]
			if !launcher.ValidSessionID(session) {
				return fmt.Errorf("%q is not a session id (a UUID)", session)
			}
			if lf.remote {
				return errors.New("ccrelay attach runs Claude in this terminal: --remote does not apply")
			}
			state, err := stateDir(lf.state)
			if err != nil {
				return err
			}
			home, err := os.UserHomeDir()
			if err != nil {
				return err
			}
			dir, err := sessionFolder(claude.ConfigDir(os.Getenv, home), session)
			if err != nil {
				return err
			}
			if err := stopDaemonSession(state, session, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if err := os.Chdir(dir); err != nil {
				return fmt.Errorf("go to the session's folder: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "ccrelay: resuming %s in %s\n", session, dir)
			return runLocal(cmd, &lf, append([]string{"--resume", session}, args[1:]...))
		},
	}
	addLocalFlags(cmd, &lf)
	return cmd
}

// sessionFolder finds the folder a session of Claude Code ran in, from its
// transcript.
func sessionFolder(configDir, session string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(configDir, "projects", "*", session+".jsonl"))
	if err != nil {
		return "", err
	}
	for _, m := range matches {
		h, err := claude.ReadHead(m)
		if err == nil && h.Cwd != "" && filepath.Base(filepath.Dir(m)) == claude.EscapeProjectPath(h.Cwd) {
			return h.Cwd, nil
		}
	}
	return "", fmt.Errorf("Claude Code has no session %s on this machine (no transcript under %s)", session, filepath.Join(configDir, "projects"))
}

// stopDaemonSession stops the ccrelay a daemon runs the session in, if
// any, and waits until it has ended.
func stopDaemonSession(state, session string, stderr interface{ Write([]byte) (int, error) }) error {
	path := filepath.Join(runningDir(state), session+".lock")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if f, err := launcher.TryLock(path); err == nil {
		os.Remove(path) // nobody holds it: a leftover
		f.Close()
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%s holds no pid", path)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ccrelay: the daemon runs %s: stopping it there first\n", session)
	if err := askToStop(p); err != nil {
		return fmt.Errorf("stop the daemon's session: %w", err)
	}
	deadline := time.Now().Add(attachWait)
	for time.Now().Before(deadline) {
		f, err := launcher.TryLock(path)
		if err == nil {
			os.Remove(path) // made again by TryLock if the session had removed it
			f.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the daemon's session %s did not stop within %s", session, attachWait)
}
