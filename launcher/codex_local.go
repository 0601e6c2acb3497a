package launcher

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// ErrCodexNotFound is returned when the codex binary cannot be found.
var ErrCodexNotFound = errors.New("codex not found on PATH; install the Codex CLI with `npm install -g @openai/codex` or give its path with --codex")

// CodexLocalOptions configure RunCodexLocal.
type CodexLocalOptions struct {
	Codex string   // path or name of the codex binary ("codex")
	Args  []string // the user's arguments, passed through unchanged
	Dir   string   // "": this process's working folder
	Env   []string // nil: this process's environment; CCRELAY_* is never passed
	// CodexHome is Codex's home (codex.Home), where its rollouts are.
	CodexHome      string
	Stdin          *os.File
	Stdout, Stderr *os.File
	StopTimeout    time.Duration // SIGTERM to SIGKILL when ctx ends (default 5 s)
	Logger         *slog.Logger
	// OnThread is called once for each rollout of a thread this Codex
	// runs (a new one, or one it resumes), from the watching goroutine.
	OnThread func(path string, meta *codex.SessionMeta)
	// ScanEvery is how often the sessions folder is looked at for the
	// rollouts of this run (default CodexScanEvery).
	ScanEvery time.Duration
}

// CodexScanEvery is how often local mode looks for the rollouts of the
// Codex it runs: Codex has no hook that names its thread, so the sessions
// folder is walked (a stat per rollout file) while Codex runs.
const CodexScanEvery = time.Second

// CodexExitWait bounds the look for a rollout after Codex exits: the
// TUI's shared app-server writes the rollout, and may finish a moment
// after the TUI.
const CodexExitWait = 2 * time.Second

// RunCodexLocal runs the interactive Codex CLI in the user's terminal as
// `codex` with the same arguments would run (stdio, exit code; SIGINT,
// SIGTERM, SIGHUP and SIGWINCH sent to ccrelay are handed on), and reports
// the rollout of each thread it runs through OnThread. It returns Codex's
// exit code (128+n for a signal) once Codex has exited and the rollouts it
// wrote have been looked for a last time.
func RunCodexLocal(ctx context.Context, o CodexLocalOptions) (int, error) {
	if o.Codex == "" {
		o.Codex = "codex"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 5 * time.Second
	}
	if o.ScanEvery <= 0 {
		o.ScanEvery = CodexScanEvery
	}
	if o.OnThread == nil {
		o.OnThread = func(string, *codex.SessionMeta) {}
	}
	path, err := exec.LookPath(o.Codex)
	if err != nil {
		return 0, fmt.Errorf("%w (%v)", ErrCodexNotFound, err)
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return 0, err
		}
	}
	w := newCodexWatch(o.CodexHome, dir, o.Args, o.OnThread, o.Logger)
	// What is there before Codex starts is not this run's, unless it grows
	// (a resumed thread).
	w.snapshot()

	cmd := exec.Command(path, o.Args...)
	cmd.Dir = o.Dir
	cmd.Env = claudeEnv(o.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	cmd.SysProcAttr = childAttr()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, localSignals...)
	defer signal.Stop(sigs)
	restore := saveTerminal(o.Stdin)

	tree, err := startTree(cmd)
	if err != nil {
		return 0, fmt.Errorf("start codex: %w", err)
	}
	defer tree.release()
	w.started(cmd.Process.Pid)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	scanCtx, stopScan := context.WithCancel(context.Background())
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		w.run(scanCtx, o.ScanEvery)
	}()
	finish := func() {
		stopScan()
		<-scanDone
		w.last(CodexExitWait)
	}

	var killTimer <-chan time.Time
	stopping := false
	for {
		select {
		case err := <-waited:
			if sig, ok := killedBy(err); ok {
				restore()
				if o.Stderr != nil {
					fmt.Fprintf(o.Stderr, "\r\nccrelay: Codex was killed by %s (%s); the terminal is restored.\r\n", signalName(sig), sig)
				}
			}
			finish()
			return exitCode(cmd, err)
		case sig := <-sigs:
			tree.forward(sig)
		case <-ctx.Done():
			if !stopping {
				stopping = true
				if sc := (SignalCause{}); errors.As(context.Cause(ctx), &sc) {
					tree.forward(sc.Signal)
				} else {
					_ = tree.terminate()
				}
				killTimer = time.After(o.StopTimeout)
			}
		case <-killTimer:
			o.Logger.Warn("codex did not stop after SIGTERM; killing it", "pid", cmd.Process.Pid)
			_ = tree.kill()
			killTimer = nil
		}
	}
}

// codexWatch finds the rollouts of the threads one Codex run starts or
// resumes: Codex says nothing of its thread to another process, so a
// rollout is this run's when it appears (or grows, for a resume) after
// the start and its session_meta names this folder and the kind of Codex
// run (the TUI's originator, or exec's for `codex exec`), and it is not
// another Codex's in the same folder (codex_holder.go: a process of this
// run's tree other than Codex's shared app server holds it open; where
// that is not known, the first thread found that began after the start
// only); a thread the arguments resume by id is this run's wherever
// it ran.
type codexWatch struct {
	sessions   string
	cwd        []string // the folder as given and with links resolved
	originator string   // what session_meta's originator must be
	resume     string   // the thread `resume <id>` names, if any
	onThread   func(string, *codex.SessionMeta)
	log        *slog.Logger
	holderOf   func(path string, root int) rolloutHolder

	mu     sync.Mutex
	root   int              // the Codex process started (0 until it is)
	start  time.Time        // when it was started (zero until it is)
	found  bool             // a thread of this run was reported (one resumed by id aside)
	before map[string]int64 // size of each rollout before the start
	done   map[string]bool  // rollouts reported, or found to be another run's
}

func newCodexWatch(codexHome, dir string, args []string, onThread func(string, *codex.SessionMeta), log *slog.Logger) *codexWatch {
	w := &codexWatch{sessions: codex.SessionsDir(codexHome), cwd: []string{filepath.Clean(dir)}, onThread: onThread, log: log,
		holderOf: holderOf, before: map[string]int64{}, done: map[string]bool{}}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != w.cwd[0] {
		w.cwd = append(w.cwd, real)
	}
	w.originator, w.resume = codexRunKind(args)
	return w
}

// Originators of session_meta, by how Codex runs.
const (
	CodexOriginatorTUI  = "codex-tui"
	CodexOriginatorExec = "codex_exec"
)

// codexRunKind reads the user's arguments: which originator the threads
// of this run have, and the thread `resume <id>` (or `exec resume <id>`)
// continues.
func codexRunKind(args []string) (originator, resume string) {
	originator = CodexOriginatorTUI
	pos := positional(args)
	if len(pos) > 0 && (pos[0] == "exec" || pos[0] == "e") {
		originator = CodexOriginatorExec
		pos = pos[1:]
	}
	if len(pos) > 1 && pos[0] == "resume" && protocol.IsSessionID(strings.ToLower(pos[1])) {
		resume = strings.ToLower(pos[1])
	}
	return originator, resume
}

// positional is args without the options (a `-x value` pair counts as an
// option when the value does not look like a word Codex takes as a
// command: the subcommands and ids read here are never an option's value
// in practice, `-c key=value` and `-m model` aside).
func positional(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i+1:]...)
		case strings.HasPrefix(a, "-"):
			if !strings.Contains(a, "=") && codexValueFlag(a) && i+1 < len(args) {
				i++
			}
		default:
			out = append(out, a)
		}
	}
	return out
}

// codexValueFlag reports whether a Codex option takes the next argument as
// its value.
func codexValueFlag(a string) bool {
	switch a {
	case "-c", "--config", "-m", "--model", "-p", "--profile", "-s", "--sandbox", "-a", "--ask-for-approval",
		"-C", "--cd", "-i", "--image", "--add-dir", "--remote", "--enable", "--disable", "--local-provider", "-o",
		"--output-last-message", "--output-schema", "--color":
		return true
	}
	return false
}

// snapshot records the rollouts there before Codex starts, with their
// sizes.
func (w *codexWatch) snapshot() {
	files, err := scanner.CodexRollouts(w.sessions)
	if err != nil {
		w.log.Warn("cannot list Codex's rollouts", "dir", w.sessions, "err", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			w.before[f] = fi.Size()
		}
	}
}

// run looks for this run's rollouts every interval until ctx ends.
func (w *codexWatch) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.scan()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// last looks once more after Codex exited, and again for up to wait while
// a rollout found is not yet readable.
func (w *codexWatch) last(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for w.scan() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // a first line being written; bounded by wait
	}
}

// scan reports the rollouts of this run not reported yet; it returns true
// when one could not be judged yet (its first line is not whole).
func (w *codexWatch) scan() (pending bool) {
	files, err := scanner.CodexRollouts(w.sessions)
	if err != nil {
		w.log.Warn("cannot list Codex's rollouts", "dir", w.sessions, "err", err)
		return false
	}
	for _, f := range files {
		w.mu.Lock()
		done := w.done[f]
		size, existed := w.before[f]
		w.mu.Unlock()
		if done {
			continue
		}
		id, _ := codex.ThreadID(f)
		explicit := id != "" && id == w.resume
		if existed && !explicit {
			fi, err := os.Stat(f)
			if err != nil || fi.Size() <= size {
				continue // not written by this run (yet)
			}
		}
		meta, err := readSessionMeta(f)
		if err != nil {
			if errors.Is(err, errMetaPending) {
				pending = true
				continue
			}
			w.log.Info("a rollout that is not this run's thread", "file", f, "err", err)
			w.markDone(f)
			continue
		}
		if meta.ID != "" && !strings.EqualFold(meta.ID, id) {
			// Codex names a rollout by its thread: this one was copied or
			// renamed, and would be followed as the name's thread.
			w.log.Info("a rollout whose session_meta is another thread's than its name", "file", f, "id", meta.ID)
			w.markDone(f)
			continue
		}
		if meta.ParentThreadID != "" && !explicit {
			// A subagent's thread: the follower follows it with its
			// parent's, into the parent's session.
			w.log.Info("a subagent's thread, followed with its parent", "file", f, "parent", meta.ParentThreadID)
			w.markDone(f)
			continue
		}
		if !explicit && !w.ours(meta) {
			w.log.Info("a rollout of another Codex run", "file", f, "cwd", meta.Cwd, "originator", meta.Originator)
			w.markDone(f)
			continue
		}
		if !explicit {
			if other, h := w.another(f, meta, existed); other {
				w.log.Info("a rollout of another Codex process in this folder", "file", f, "held by", h.String())
				w.markDone(f)
				continue
			}
			w.mu.Lock()
			w.found = true
			w.mu.Unlock()
		}
		w.markDone(f)
		w.log.Info("following a Codex thread", "thread", id, "file", f, "resumed", existed)
		w.onThread(f, meta)
	}
	return pending
}

// started tells the watch the process Codex runs as.
func (w *codexWatch) started(pid int) {
	w.mu.Lock()
	w.root = pid
	w.start = time.Now()
	w.mu.Unlock()
}

// startSlack is how much earlier than this run's start a thread of its may
// say it started: the two clocks are the same, but Codex writes
// milliseconds and the start is taken just after the process is.
const startSlack = time.Second

// another reports whether a rollout that has this run's folder and kind
// is another Codex process's: one that only other processes hold open, or,
// where no process holds it or the system does not say (Codex's shared
// app server writes the threads of every TUI), one whose thread started
// before this run did (session_meta's timestamp: a thread another TUI
// opened earlier, whose rollout Codex writes at its first prompt; a
// resumed one, grown, aside), and any
// after the first thread this run found (never a switch to another's
// thread).
func (w *codexWatch) another(f string, meta *codex.SessionMeta, grown bool) (bool, rolloutHolder) {
	w.mu.Lock()
	root, found, start := w.root, w.found, w.start
	w.mu.Unlock()
	h := w.holderOf(f, root)
	switch h {
	case holderOurs:
		return false, h
	case holderOther:
		return true, h
	}
	if found {
		return true, h
	}
	if grown || start.IsZero() {
		return false, h // a resumed thread started before this run
	}
	if began, err := time.Parse(time.RFC3339Nano, meta.Timestamp); err == nil && began.Before(start.Add(-startSlack)) {
		return true, h
	}
	return false, h
}

func (w *codexWatch) markDone(f string) {
	w.mu.Lock()
	w.done[f] = true
	w.mu.Unlock()
}

// ours reports whether a thread's session_meta is this run's kind, in this
// folder.
func (w *codexWatch) ours(m *codex.SessionMeta) bool {
	if m.Originator != w.originator {
		return false
	}
	for _, d := range w.cwd {
		if filepath.Clean(m.Cwd) == d {
			return true
		}
	}
	if real, err := filepath.EvalSymlinks(m.Cwd); err == nil {
		for _, d := range w.cwd {
			if real == d {
				return true
			}
		}
	}
	return false
}

// errMetaPending: the rollout's first line is not whole yet.
var errMetaPending = errors.New("the rollout's first line is not written yet")

// maxMetaLine bounds the first line read (session_meta embeds Codex's base
// instructions, 22 KB in 0.169.0).
const maxMetaLine = 4 << 20

// readSessionMeta reads a rollout's first line, its session_meta.
func readSessionMeta(path string) (*codex.SessionMeta, error) {
	f, err := scanner.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("open rollout: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxMetaLine), 64<<10).ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) < maxMetaLine {
			return nil, errMetaPending
		}
		return nil, fmt.Errorf("read the rollout's first line: %w", err)
	}
	rec, err := codex.Parse(line)
	if err != nil {
		return nil, err
	}
	if rec.SessionMeta == nil {
		return nil, fmt.Errorf("the rollout's first line is %q, not session_meta", rec.Type)
	}
	return rec.SessionMeta, nil
}
