package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"
)

// ErrClaudeNotFound is returned when the claude binary cannot be found.
var ErrClaudeNotFound = errors.New("claude not found on PATH; install Claude Code with `npm install -g @anthropic-ai/claude-code` or give its path with --claude")

// LocalOptions configure RunLocal.
type LocalOptions struct {
	Claude string   // path or name of the claude binary ("claude")
	Args   []string // the user's arguments, passed through
	Dir    string
	Env    []string // nil: this process's environment; CCRELAY_* is never passed
	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File
	// HookCommand is the argv of the SessionStart hook forwarder, usually
	// this binary with the `hook` subcommand; the hook file's path is
	// added as its last argument (see ForwardHook).
	HookCommand []string
	// OnSession is called for every SessionStart hook (startup, resume,
	// clear, compact), from the hook server's goroutine.
	OnSession func(SessionStart)
	// StopTimeout is how long Claude gets after SIGTERM before SIGKILL.
	StopTimeout time.Duration
	// HookDir is where the run's private folder for the hook's settings
	// and token file is made (removed when Claude ends; "": the system's
	// temporary folder). ccrelay uses its state folder, so that what a
	// killed ccrelay leaves stays there.
	HookDir string
	// StatusLine, if set, puts ccrelay's state in Claude's status line,
	// after the user's own.
	StatusLine *StatusLine
	Logger     *slog.Logger
}

// RunLocal starts interactive Claude Code in the user's terminal with a
// SessionStart hook installed, forwards SIGINT, SIGTERM, SIGHUP and SIGWINCH
// sent to ccrelay to it, and
// returns its exit code when it exits. SIGWINCH is forwarded too (a resize
// from the terminal reaches Claude directly as well: it is in the
// foreground process group). When ctx is cancelled Claude is
// stopped (SIGTERM, then SIGKILL). Claude never outlives RunLocal; on Linux it
// is also killed if this process dies.
func RunLocal(ctx context.Context, o LocalOptions) (int, error) {
	if o.Claude == "" {
		o.Claude = "claude"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 5 * time.Second
	}
	path, err := exec.LookPath(o.Claude)
	if err != nil {
		return 0, fmt.Errorf("%w (%v)", ErrClaudeNotFound, err)
	}
	// The user's own --settings is merged into ccrelay's: Claude takes
	// the last --settings only.
	settingsArg, args := TakeSettings(o.Args)
	user, err := userSettings(settingsArg, o.Dir)
	if err != nil {
		return 0, err
	}
	onSession := o.OnSession
	if onSession == nil {
		onSession = func(SessionStart) {}
	}
	args, fork := ForkSessionArgs(args)
	onSession = forkSessionStart(fork, onSession, o.Logger)
	hooks, err := startHookServer(onSession, o.Logger)
	if err != nil {
		return 0, err
	}
	defer hooks.close()
	var userSL any
	if o.StatusLine != nil {
		userSL = userStatusLine(user, o.Dir, o.Env)
	}
	settings, cleanup, err := writeMergedSettings(o.HookDir, user, o.HookCommand, hooks, o.StatusLine, userSL)
	if err != nil {
		return 0, err
	}
	defer cleanup()

	cmd := exec.Command(path, append(args, "--settings="+settings)...)
	cmd.Dir = o.Dir
	// No secret of ccrelay's in Claude's environment: the hook finds its
	// token in the hook file.
	cmd.Env = claudeEnv(o.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	cmd.SysProcAttr = childAttr()

	// Catch the signals before starting, so none is lost in between.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, localSignals...)
	defer signal.Stop(sigs)

	// The terminal as it is now: Claude puts it in raw mode, and a Claude
	// that dies from a signal cannot put it back.
	restore := saveTerminal(o.Stdin)

	tree, err := startTree(cmd)
	if err != nil {
		return 0, fmt.Errorf("start claude: %w", err)
	}
	defer tree.release()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var killTimer <-chan time.Time
	stopping := false
	forward := func(sig os.Signal) {
		// Claude decides what the signal means (Ctrl-C twice, etc.).
		tree.forward(sig)
	}
	for {
		select {
		case err := <-waited:
			if sig, ok := killedBy(err); ok {
				restore()
				if o.Stderr != nil {
					fmt.Fprintf(o.Stderr, "\r\nccrelay: Claude was killed by %s (%s); the terminal is restored.\r\n", signalName(sig), sig)
				}
			}
			return exitCode(cmd, err)
		case sig := <-sigs:
			forward(sig)
		case <-ctx.Done():
			if !stopping {
				stopping = true
				// Ended by a signal to ccrelay (SIGHUP, SIGTERM): Claude
				// ends from that signal, not from a SIGTERM after it.
				if sc := (SignalCause{}); errors.As(context.Cause(ctx), &sc) {
					forward(sc.Signal)
				} else {
					_ = tree.terminate()
				}
				killTimer = time.After(o.StopTimeout)
			}
		case <-killTimer:
			o.Logger.Warn("claude did not stop after SIGTERM; killing it", "pid", cmd.Process.Pid)
			_ = tree.kill()
			killTimer = nil
		}
	}
}

// forkSessionStart passes SessionStart hooks to onSession for a run that
// forks a session into fork (ForkSessionArgs; "": no fork). Claude Code
// 2.1.197 reports a fork's start as the resume of its parent (source
// "resume", the parent's id and transcript path) while it writes the fork
// under fork's id; 2.1.330 names the fork (source "fork"). So the run's
// first start, when it names another session as resumed, is the fork's:
// followed there, the parent's transcript, which the fork never writes,
// would relay nothing. Later starts (/clear, /compact) pass as they are.
func forkSessionStart(fork string, onSession func(SessionStart), log *slog.Logger) func(SessionStart) {
	if fork == "" || !ValidSessionID(fork) {
		return onSession
	}
	var mu sync.Mutex
	first := true
	return func(s SessionStart) {
		mu.Lock()
		isFirst := first
		first = false
		mu.Unlock()
		if isFirst && s.Source == "resume" && s.SessionID != fork {
			log.Info("SessionStart named the forked session, not the fork: following the fork", "reported", s.SessionID, "fork", fork)
			s.SessionID = fork
			if s.TranscriptPath != "" {
				s.TranscriptPath = filepath.Join(filepath.Dir(s.TranscriptPath), fork+".jsonl")
			}
		}
		onSession(s)
	}
}

// SignalCause is the cause (context.Cause) of a context ended by a signal
// to ccrelay: RunLocal passes that signal on to Claude, instead of SIGTERM,
// so that Claude ends as it would have without ccrelay (SIGHUP: 129).
type SignalCause struct{ Signal os.Signal }

func (c SignalCause) Error() string { return c.Signal.String() + " received" }

func exitCode(cmd *exec.Cmd, err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, fmt.Errorf("wait for claude: %w", err)
}

// killedBy reports the signal that ended Claude, if one did.
func killedBy(err error) (syscall.Signal, bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal(), true
		}
	}
	return 0, false
}

// saveTerminal records f's terminal state and returns what puts it back
// (nothing, when f is not a terminal).
func saveTerminal(f *os.File) func() {
	if f == nil || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	st, err := term.GetState(int(f.Fd()))
	if err != nil {
		return func() {}
	}
	return func() { _ = term.Restore(int(f.Fd()), st) }
}
