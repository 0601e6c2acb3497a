// Package daemon is the machine daemon (`ccrelay daemon`): it announces
// the machine and the folders sessions may start in, and starts, resumes
// and stops remote-mode sessions from the app as its own children, only
// in folders under what the machine's owner allowed and with the
// permission modes the machine allows.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// Link is what the daemon needs of the relay client.
type Link interface {
	Commands() <-chan apiclient.Inbound
	Announce(session string, info json.RawMessage)
	Reply(ctx context.Context, session, id string, ok bool, message string) error
}

// Ledger records each command's outcome, so that a command the relay
// delivers again is answered, never carried out twice (launcher.Ledger).
type Ledger interface {
	Begin(id string) (fresh bool, outcome error, err error)
	Finish(id string, outcome error) error
}

// Defaults and bounds.
const (
	// DefaultMaxSessions bounds the sessions one daemon runs at once.
	DefaultMaxSessions = 16
	// DefaultRescan is how often the projects folder is read again.
	DefaultRescan = 30 * time.Second
	// DefaultStopTimeout is how long the sessions get to end when the
	// daemon stops, before they are killed.
	DefaultStopTimeout = 15 * time.Second
)

// fileHolder is an Output that is a file underneath, lent for a moment.
type fileHolder interface {
	Hold(func(*os.File) error) error
}

// Config configures Run.
type Config struct {
	Link   Link
	Ledger Ledger
	// Session is the daemon's own session id: the app sends it start and
	// stop, and reads the machine's description in its info.
	Session string
	// Command starts a session: ccrelay and the flags that reach the
	// relay (relay URL, token file, state folder, claude). Run adds
	// --remote, --daemon-pipe, --session, --started-by, and Claude's
	// options after --.
	Command []string
	// Env is the sessions' environment (nil: this process's).
	Env []string
	// ClaudeDir is Claude Code's configuration folder: its projects folder
	// lists the folders Claude Code knows (allowed unless NoKnown).
	ClaudeDir string
	// Roots are folders under which any folder may be started (--allow).
	Roots []string
	// NoKnown: only Roots are allowed, not the folders Claude Code (or
	// Codex) knows.
	NoKnown bool
	// AllowBypass lets the app choose bypassPermissions.
	AllowBypass bool
	// Machine is the machine's name; ClaudeVersion Claude Code's version.
	Machine, ClaudeVersion string
	// CodexVersion is the Codex CLI's version ("": none installed, and no
	// Codex session starts). CodexCommand starts a Codex session: ccrelay
	// codex and the flags that reach the relay; Run adds --remote,
	// --daemon-pipe, --session, --started-by, and Codex's options after
	// --. CodexHome is Codex's home, where a thread to resume has its
	// rollout.
	CodexVersion string
	CodexCommand []string
	CodexHome    string
	// CodexBusy reports whether a Codex thread runs now (a session of
	// ccrelay's holds it: launcher.CodexThreadBusy), which a resume of it
	// must not start again; nil: none is known to.
	CodexBusy func(thread string) bool
	// MaxSessions bounds the sessions running at once (default
	// DefaultMaxSessions).
	MaxSessions int
	Rescan      time.Duration
	StopTimeout time.Duration
	// Output receives the sessions' stderr (nil: discarded). A fileHolder
	// (logfile.File) gives each session its file as it is at the start.
	Output io.Writer
	Logger *slog.Logger
}

// child is a session the daemon started. It learns that the daemon is gone
// from its stdin, whose only writer is the daemon: the kernel closes it
// with the daemon, however the daemon dies, and the session ends itself
// (it notes why and stops its Claude).
type child struct {
	session string
	cmd     *exec.Cmd
	pipe    io.WriteCloser // the session's stdin: messages, and the daemon's life
	// start is the start it was started by, dir its folder (resolved).
	start protocol.Command
	dir   string
	// thread is the id the session runs as when it is not session: a new
	// Codex thread's, as the session reported it ("" until then).
	thread string
}

// Run announces the machine and carries out the app's start and stop
// commands until ctx ends; then it ends its sessions (each notes that the
// daemon stopped) and waits for them, killing what outlives StopTimeout.
func Run(ctx context.Context, cfg Config) error {
	if !protocol.IsSessionID(cfg.Session) {
		return fmt.Errorf("daemon session %q is not a session id", cfg.Session)
	}
	if len(cfg.Command) == 0 {
		return errors.New("daemon: no command to start sessions with")
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = DefaultRescan
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &daemon{cfg: cfg, log: cfg.Logger, heads: heads{}, children: map[string]*child{}, exited: make(chan exit, cfg.MaxSessions),
		threads: make(chan threadReport), quit: make(chan struct{})}
	for _, r := range cfg.Roots {
		real, err := realDir(r)
		if err != nil {
			return fmt.Errorf("--allow %s: %w", r, err)
		}
		d.roots = append(d.roots, real)
	}
	defer d.stopAll()
	d.rescan()
	tick := time.NewTicker(cfg.Rescan)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case in := <-cfg.Link.Commands():
			d.command(ctx, in)
		case e := <-d.exited:
			d.reap(e)
		case t := <-d.threads:
			d.learnThread(t)
		case <-tick.C:
			d.rescan()
		}
	}
}

type daemon struct {
	cfg   Config
	log   *slog.Logger
	roots []string // real paths of cfg.Roots

	cat      catalog
	heads    heads // what transcripts' first lines said (catalog.go)
	children map[string]*child
	exited   chan exit
	threads  chan threadReport // what the sessions report (report.go)
	quit     chan struct{}     // closed when Run stops taking reports
	wg       sync.WaitGroup    // one per child: its Wait
	lastInfo []byte
}

// exit is a child that ended.
type exit struct {
	c   *child
	err error
}

// rescan reads the projects folder again and announces what changed.
func (d *daemon) rescan() {
	if d.cfg.NoKnown {
		d.cat = catalog{known: map[string]bool{}}
	} else if cat, err := scan(d.cfg.ClaudeDir, d.heads); err != nil {
		d.log.Warn("could not read Claude Code's projects", "err", err)
	} else {
		if d.cfg.CodexVersion != "" && d.cfg.CodexHome != "" {
			scanCodex(&cat, d.cfg.CodexHome, d.heads)
		}
		d.cat = cat
	}
	d.announce()
}

// info is the daemon's session description.
func (d *daemon) info() json.RawMessage {
	di := protocol.DaemonInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, ClaudeVersion: d.cfg.ClaudeVersion,
		CodexVersion: d.cfg.CodexVersion, AllowBypass: d.cfg.AllowBypass,
		Roots: d.cfg.Roots, Folders: d.cat.folders}
	for id, c := range d.children {
		di.Running = append(di.Running, id)
		if c.thread != "" {
			di.Running = append(di.Running, c.thread)
			if di.Threads == nil {
				di.Threads = map[string]string{}
			}
			di.Threads[id] = c.thread
		}
	}
	slices.Sort(di.Running)
	if di.Folders == nil {
		di.Folders = []protocol.DaemonFolder{}
	}
	b, _ := json.Marshal(map[string]any{"mode": "machine", "status": launcher.StatusIdle, "machine": d.cfg.Machine,
		"title": d.cfg.Machine, "daemon": di})
	return b
}

func (d *daemon) announce() {
	info := d.info()
	if string(info) == string(d.lastInfo) {
		return
	}
	d.lastInfo = info
	d.cfg.Link.Announce(d.cfg.Session, info)
}

// command carries out one command from the app, once (the ledger answers
// a repeat with its outcome).
func (d *daemon) command(ctx context.Context, in apiclient.Inbound) {
	reply := func(err error) {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if rerr := d.cfg.Link.Reply(ctx, in.Session, in.Command.ID, err == nil, msg); rerr != nil {
			d.log.Warn("could not answer a command; the answer is sent again on the next connection", "id", in.Command.ID, "err", rerr)
		}
	}
	if in.Session != d.cfg.Session {
		reply(errors.New("this is no session of the daemon"))
		return
	}
	fresh, outcome, err := d.cfg.Ledger.Begin(in.Command.ID)
	switch {
	case err != nil:
		reply(fmt.Errorf("the daemon could not record the command: %w", err))
		return
	case !fresh && errors.Is(outcome, launcher.ErrInProgress):
		return
	case !fresh:
		reply(outcome)
		return
	}
	c := in.Command
	d.log.Info("command from the app", "id", c.ID, "kind", c.Kind, "session", c.Target, "dir", c.Dir)
	var result error
	switch c.Kind {
	case protocol.CommandStart:
		result = d.start(c)
	case protocol.CommandStop:
		result = d.stop(c.Target)
	default:
		result = fmt.Errorf("a daemon takes start and stop, not %q", c.Kind)
	}
	if result != nil {
		d.log.Warn("command refused", "id", c.ID, "kind", c.Kind, "err", result)
	}
	if err := d.cfg.Ledger.Finish(c.ID, result); err != nil {
		d.log.Error("could not record a command's outcome", "id", c.ID, "err", err)
	}
	reply(result)
	d.announce()
}

// allowedDir resolves dir and checks that sessions may start there: a
// folder Claude Code (or Codex, when installed) knows, or one under an
// allowed root.
func (d *daemon) allowedDir(dir string) (string, error) {
	real, err := realDir(dir)
	if err != nil {
		return "", fmt.Errorf("cannot start in %s: %w", dir, err)
	}
	if d.cat.known[real] {
		return real, nil
	}
	for _, r := range d.roots {
		if within(real, r) {
			return real, nil
		}
	}
	return "", fmt.Errorf("%s is outside the folders this machine allows: the folders Claude Code or Codex already knows, and those under --allow of `ccrelay daemon`", dir)
}

// start starts a session as asked: checks first, then ccrelay --remote.
func (d *daemon) start(c protocol.Command) error {
	dir, err := d.allowedDir(c.Dir)
	if err != nil {
		return err
	}
	if ch := d.running(c.Target); ch != nil {
		if joins(ch, c, dir) {
			// The same work asked again (a retry, a second tap, the app's
			// Resume of the thread it runs): it runs once.
			d.log.Info("start joined to the session running", "session", ch.session, "target", c.Target, "thread", ch.thread)
			return nil
		}
		return fmt.Errorf("session %s is already running", c.Target)
	}
	if len(d.children) >= d.cfg.MaxSessions {
		return fmt.Errorf("this machine already runs %d sessions from the app, its most (--max-sessions)", d.cfg.MaxSessions)
	}
	switch c.Agent {
	case "", protocol.AgentClaude:
	case protocol.AgentCodex:
		return d.startCodex(c, dir)
	default:
		return fmt.Errorf("this machine runs Claude Code and Codex sessions, not %q", c.Agent)
	}
	var claudeArgs []string
	if c.Model != "" && c.Model != "default" {
		if err := launcher.CheckModel(c.Model); err != nil {
			return err
		}
		claudeArgs = append(claudeArgs, "--model="+c.Model)
	}
	if c.Mode != "" {
		if err := launcher.CheckPermissionMode(c.Mode, d.cfg.AllowBypass); err != nil {
			if errors.Is(err, launcher.ErrBypassNotAllowed) {
				return errors.New("this machine does not allow bypassPermissions from the app (ccrelay daemon --allow-bypass-from-app)")
			}
			return err
		}
		claudeArgs = append(claudeArgs, "--permission-mode="+c.Mode)
	}
	projectDir, err := claude.ProjectDir(d.cfg.ClaudeDir, dir)
	if err != nil {
		return err
	}
	_, statErr := os.Stat(claude.TranscriptPath(projectDir, c.Target))
	exists := statErr == nil
	switch {
	case c.Resume && !exists:
		return fmt.Errorf("Claude Code has no session %s in %s to resume", c.Target, dir)
	case !c.Resume && exists:
		return fmt.Errorf("session %s exists already: resume it", c.Target)
	case !c.Resume && c.Text == "":
		return errors.New("a new session needs a first prompt")
	}
	args := append(slices.Clone(d.cfg.Command[1:]), "--remote", "--daemon-pipe", "--session", c.Target, "--started-by", d.cfg.Session)
	if d.cfg.AllowBypass {
		args = append(args, "--allow-bypass-from-app")
	}
	return d.spawn(c, dir, d.cfg.Command[0], args, claudeArgs, false)
}

// spawn starts a session's ccrelay (bin with args, then the agent's
// options after --) in dir, its first prompt and the machine's name on its
// stdin, as a child of the daemon. With report, the session reports the
// id of its thread on a pipe of its own (report.go).
func (d *daemon) spawn(c protocol.Command, dir, bin string, args, agentArgs []string, report bool) error {
	var reports, reportW *os.File
	if report && reportPipes {
		var err error
		if reports, reportW, err = os.Pipe(); err != nil {
			return fmt.Errorf("start the session: %w", err)
		}
		// The session holds its own copy of the writing end: the reader
		// sees the end of the pipe when the session exits.
		defer reportW.Close()
		args = append(args, "--daemon-report-fd", "3")
	}
	if len(agentArgs) > 0 {
		args = append(append(args, "--"), agentArgs...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = d.cfg.Env
	if reportW != nil {
		cmd.ExtraFiles = []*os.File{reportW} // descriptor 3
	}
	pipe, err := cmd.StdinPipe()
	if err != nil {
		if reports != nil {
			reports.Close()
		}
		return err
	}
	// The first line: the first prompt, and the machine's name, which the
	// session announces as its machine (the app groups sessions by it).
	first, _ := json.Marshal(struct {
		Prompt  string `json:"prompt,omitempty"`
		Machine string `json:"machine,omitempty"`
	}{c.Text, d.cfg.Machine})
	start := func(out io.Writer) error {
		cmd.Stdout, cmd.Stderr = out, out
		return cmd.Start()
	}
	if h, ok := d.cfg.Output.(fileHolder); ok {
		// The session writes to the file itself, which it keeps when the
		// daemon dies (through a pipe, its next message would kill it).
		err = h.Hold(func(f *os.File) error { return start(f) })
	} else {
		err = start(d.cfg.Output)
	}
	if err != nil {
		if reports != nil {
			reports.Close()
		}
		return fmt.Errorf("start the session: %w", err)
	}
	ch := &child{session: c.Target, cmd: cmd, pipe: pipe, start: c, dir: dir}
	d.children[c.Target] = ch
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		err := cmd.Wait()
		d.exited <- exit{ch, err}
	}()
	if reports != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.readReports(ch, reports)
		}()
	}
	// The pipe holds the prompt until the session reads it (a pipe's
	// buffer can be smaller than a prompt: written aside).
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if _, err := pipe.Write(append(first, '\n')); err != nil {
			d.log.Warn("could not hand the session its first prompt", "session", c.Target, "err", err)
		}
	}()
	d.log.Info("started a session", "session", c.Target, "dir", dir, "pid", cmd.Process.Pid, "resume", c.Resume)
	return nil
}

// stop asks a session the daemon runs to end (named by its start's
// target, or by the thread it reported).
func (d *daemon) stop(session string) error {
	ch := d.running(session)
	if ch == nil {
		return fmt.Errorf("session %s is not running on this machine's daemon", session)
	}
	if _, err := ch.pipe.Write([]byte("{\"stop\":true}\n")); err != nil {
		return fmt.Errorf("stop session %s: %w", session, err)
	}
	return nil
}

// reap forgets a session that ended.
func (d *daemon) reap(e exit) {
	if d.children[e.c.session] == e.c {
		delete(d.children, e.c.session)
	}
	_ = e.c.pipe.Close()
	d.log.Info("a session ended", "session", e.c.session, "err", e.err)
	d.rescan() // its transcript is there to resume now
}

// stopAll ends every session: their pipes close (each notes that the
// daemon stopped and stops its Claude); what outlives StopTimeout is
// killed. Every child goroutine has ended when it returns.
func (d *daemon) stopAll() {
	close(d.quit)
	for _, c := range d.children {
		_ = c.pipe.Close()
	}
	deadline := time.NewTimer(d.cfg.StopTimeout)
	defer deadline.Stop()
	for len(d.children) > 0 {
		select {
		case e := <-d.exited:
			delete(d.children, e.c.session)
		case <-deadline.C:
			for _, c := range d.children {
				d.log.Warn("a session did not end in time: killed", "session", c.session)
				_ = c.cmd.Process.Kill()
			}
			deadline.Reset(time.Hour)
		}
	}
	d.wg.Wait()
}
