package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

// Command is a command from the app for the session, with the way to tell
// the app what became of it.
type Command struct {
	protocol.Command
	// Reply reports the outcome: err nil is done, otherwise rejected with
	// err's text. It may be called from any goroutine, once.
	Reply func(err error)
}

// Scanner is what the switching loop needs of the transcript scanner.
type Scanner interface {
	// AddSessionPath follows session id, whose main transcript is
	// transcriptPath as the SessionStart hook reported it (where Claude
	// really writes, e.g. under a symlinked working directory's resolved
	// path; "": the project folder's default).
	AddSessionPath(id, transcriptPath string)
	// Flush delivers at once everything on disk (Claude has stopped).
	Flush(ctx context.Context) error
}

// LoopOptions configure RunLoop.
type LoopOptions struct {
	Local  LocalOptions  // OnSession is set by the loop
	Remote RemoteOptions // Dir, Env, Claude, Args are taken from Local when empty
	// Pipeline maps both modes' records; Scanner feeds it in local mode.
	Pipeline *Pipeline
	Scanner  Scanner
	Commands <-chan Command
	Events   RemoteEvents // session state (both modes) and live deltas
	// StartRemote starts headless in remote mode with a new session
	// (Session) waiting for the app's first prompt.
	StartRemote bool
	Session     string
	// Resume: Session already exists in Claude Code (a past session to
	// continue): its first start is --resume, not --session-id.
	Resume bool
	// Keys is the terminal in remote mode: pressing space twice takes the
	// session back. nil in headless mode.
	Keys *os.File
	// Notice is where the terminal is told what happens (nil: nowhere).
	Notice io.Writer
	Logger *slog.Logger
	// StopCut, when set, is asked when ctx ends in remote mode: a cut
	// (ok) ends the turn Claude was in the middle of, in place of a
	// cancelled one (the daemon that ran the session died: failed, with
	// its note, as the resumed Claude's repair of the turn ends it), and
	// Stopped is told whether a turn was open and cut so.
	StopCut func() (c mapper.Cut, ok bool)
	Stopped func(cut bool)
	// KilledWait is how long, after the terminal's Claude died from a
	// signal, the loop waits for a command from the app that may be on
	// its way (a prompt then goes on in remote mode) before it ends (0:
	// DefaultKilledWait; negative: no wait).
	KilledWait time.Duration
}

// DefaultKilledWait is LoopOptions.KilledWait's default: long enough for
// a command the app sent as Claude died to cross the relay.
const DefaultKilledWait = 3 * time.Second

// ErrNoSession is the reason given for a command that arrives before
// Claude told ccrelay its session.
var ErrNoSession = errors.New("the session has not started yet")

// RunLoop runs a session, switching between local mode (interactive Claude
// in the terminal, followed through its transcript) and remote mode
// (Claude driven from the app over stream-json). A prompt from the app
// takes the session to remote mode; pressing space twice in the terminal,
// or a switch command, brings it back. It returns the exit code of the
// local Claude when the user quits it, or when ctx ends. No Claude process
// outlives its mode.
func RunLoop(ctx context.Context, o LoopOptions) (int, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Notice == nil {
		o.Notice = io.Discard
	}
	l := &loop{o: o, seen: map[string]bool{}, session: o.Session, resumed: o.Resume && o.Session != ""}
	if o.StartRemote && l.session == "" {
		return 0, errors.New("remote mode needs a session id")
	}
	if l.session != "" && !ValidSessionID(l.session) {
		return 0, fmt.Errorf("session id %q is not a UUID", clip(l.session, 100))
	}
	remote := o.StartRemote
	if remote && o.Scanner != nil {
		// The scanner follows the session in remote mode too: it holds
		// the session's cursor at the last record whose envelopes are on
		// disk (Pipeline.holdRemote). First it delivers, as the terminal's,
		// what an earlier run's Claude wrote that never reached the outbox
		// (that run was killed before stream-json's copy was stored).
		// Remote mode starts only once that pass is done, however long
		// it takes: it rebuilds the session's mapper (the turn left open,
		// its calls) from the records sent before, which remote mode's
		// hold passes over (catchUp).
		l.o.Scanner.AddSessionPath(l.session, "")
		if !l.catchUp(ctx) {
			return 0, nil
		}
	}
	var first *Command // the app's command that took the session over
	for {
		if remote {
			back, err := l.remote(ctx, first)
			if err != nil || !back {
				return 0, err
			}
			crashpoint.Hit(crashpoint.BackToLocal)
			remote, first = false, nil
			continue
		}
		code, next, err := l.local(ctx)
		if err != nil || next == nil {
			return code, err
		}
		remote, first = true, next
	}
}

type loop struct {
	o       LoopOptions
	session string
	resumed bool // the session exists in Claude (local ran, or a remote turn)
	// projectDir is where Claude writes the session's transcripts, as the
	// SessionStart hook said ("": not told).
	projectDir string
	seen       map[string]bool
	seenQ      []string // seen's ids, oldest first
}

// MaxSeenCommands bounds the command ids the loop remembers to drop a
// repeat at once; older repeats are answered from the command ledger
// (MaxLedgerEntries, the same bound).
const MaxSeenCommands = MaxLedgerEntries

// fresh reports whether a command is new (the relay delivers at least
// once).
func (l *loop) fresh(c Command) bool {
	if c.ID == "" {
		return true
	}
	if l.seen[c.ID] {
		return false
	}
	l.seen[c.ID] = true
	l.seenQ = append(l.seenQ, c.ID)
	if len(l.seenQ) > MaxSeenCommands {
		delete(l.seen, l.seenQ[0])
		l.seenQ = append(l.seenQ[:0], l.seenQ[1:]...)
	}
	return true
}

func (l *loop) publish(st SessionState) {
	if l.o.Events != nil && l.session != "" {
		l.o.Events.State(l.session, st)
	}
}

// local runs interactive Claude until it exits (next nil) or the app
// takes the session (next is the command that did).
func (l *loop) local(ctx context.Context) (int, *Command, error) {
	lo := l.o.Local
	if l.resumed {
		lo.Args = append(ResumeArgs(lo.Args), "--resume="+l.session)
	}
	sessions := make(chan SessionStart, 8)
	lo.OnSession = func(s SessionStart) {
		sessions <- s
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := RunLocal(lctx, lo)
		done <- result{code, err}
	}()
	var next *Command
	model := "" // the model announced last
	for {
		select {
		case s := <-sessions:
			l.session, l.resumed = s.SessionID, true
			if s.TranscriptPath != "" {
				l.projectDir = filepath.Dir(s.TranscriptPath)
			}
			l.o.Pipeline.SetRemote(s.SessionID, false)
			l.o.Scanner.AddSessionPath(s.SessionID, s.TranscriptPath)
			model = l.o.Pipeline.Model(s.SessionID)
			l.publish(SessionState{Mode: "local", Status: StatusIdle, Model: model})
		case <-l.o.Pipeline.ModelChanged():
			// Claude in the terminal announces no model: its transcript's
			// assistant records name it, and the app prices usage by it.
			if m := l.o.Pipeline.Model(l.session); l.session != "" && m != model {
				model = m
				l.publish(SessionState{Mode: "local", Status: StatusIdle, Model: model})
			}
		case c := <-l.o.Commands:
			if !l.fresh(c) {
				continue
			}
			switch {
			case l.session == "":
				c.Reply(ErrNoSession)
			case c.Kind == protocol.CommandPrompt || (c.Kind == protocol.CommandSwitch && c.Mode == "remote"):
				if next == nil {
					cc := c
					next = &cc
					stop() // the app takes over: stop the local Claude
				} else {
					c.Reply(errors.New("the session is switching to remote mode; send it again in a moment"))
				}
			case c.Kind == protocol.CommandSwitch:
				c.Reply(nil) // already local
			default:
				c.Reply(fmt.Errorf("the session runs in local mode in the terminal; send a prompt to take it over first"))
			}
		case r := <-done:
			if r.err != nil {
				return r.code, nil, r.err
			}
			cut := SwitchCut
			if next == nil {
				if next = l.afterKilled(ctx, r.code); next == nil {
					// The user quit Claude: read what it wrote last, close.
					l.settle()
					return r.code, nil, nil
				}
				cut = KilledCut
			}
			// Stopped for the app: everything Claude wrote is read, and
			// the turn closes, before remote mode goes on: completed, or
			// failed when Claude was stopped in the middle of it (its
			// calls without a result end; the resumed Claude's repair of
			// them is its bookkeeping). The wait is however long the
			// scanner takes (catchUp): what it has not delivered when
			// remote mode has the session is passed over by remote mode's
			// hold (the resumed Claude never prints it), and the turn
			// would end as the records the mapper has say.
			if !l.catchUp(ctx) {
				l.settle()
			}
			crashpoint.Hit(crashpoint.SwitchFlushed)
			if err := l.o.Pipeline.EndTurn(context.WithoutCancel(ctx), l.session, cut, time.Now().UnixMilli()); err != nil {
				return 0, nil, err
			}
			crashpoint.Hit(crashpoint.SwitchClosed)
			return 0, next, nil
		}
	}
}

// SwitchCut ends the turn the terminal's Claude was in the middle of when
// the app took the session over.
var SwitchCut = mapper.Cut{Status: protocol.StatusFailed,
	Result: "Claude Code in the terminal was stopped while this tool ran, for the app to take the session over; the tool did not finish.",
	Note:   "Claude Code in the terminal was stopped before this turn ended: the app took the session over."}

// KilledCut ends the turn the terminal's Claude was in the middle of when
// it was killed and a prompt from the app took the session over.
var KilledCut = mapper.Cut{Status: protocol.StatusFailed,
	Result: "Claude Code in the terminal was killed while this tool ran; the tool did not finish.",
	Note:   "Claude Code in the terminal was killed before this turn ended; the app took the session over."}

// diedFromSignal reports whether an exit code is that of a process a
// signal ended (128+n, as RunLocal reports it).
func diedFromSignal(code int) bool { return code > 128 && code <= 128+64 }

// afterKilled is asked when the terminal's Claude ended with no command
// from the app taking the session over. When a signal ended Claude (not
// the user quitting it), the app may have sent a prompt that is still on
// its way (the phone's prompt and the kill raced): the loop waits
// KilledWait for a command, and a prompt (or a switch to remote mode) that
// comes is returned, for remote mode to go on with. Other commands are
// rejected. nil: nothing came (or Claude was quit): the loop ends.
func (l *loop) afterKilled(ctx context.Context, code int) *Command {
	wait := l.o.KilledWait
	if wait == 0 {
		wait = DefaultKilledWait
	}
	if wait < 0 || !diedFromSignal(code) || l.o.Commands == nil || l.session == "" || ctx.Err() != nil {
		return nil
	}
	fmt.Fprintf(l.o.Notice, "ccrelay: Claude in the terminal was killed (exit %d); waiting %s for a prompt from the app before ending.\r\n", code, wait)
	l.o.Logger.Info("claude in the terminal was killed; waiting for a command from the app on its way", "exit", code, "wait", wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			return nil
		case c := <-l.o.Commands:
			if !l.fresh(c) {
				continue
			}
			if c.Kind == protocol.CommandPrompt || (c.Kind == protocol.CommandSwitch && c.Mode == "remote") {
				l.o.Logger.Info("a command from the app takes the session over after claude was killed", "id", c.ID, "kind", c.Kind)
				return &c
			}
			c.Reply(errors.New("Claude Code in the terminal was killed; send a prompt to go on with the session from the app"))
		}
	}
}

// settle waits until the scanner has delivered everything on disk (a pass
// made at once), or a few seconds.
func (l *loop) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.o.Scanner.Flush(ctx); err != nil {
		l.o.Logger.Warn("scanner did not catch up before the switch", "err", err)
	}
}

// catchUpNotice is how long catchUp waits before it says that it waits.
var catchUpNotice = 5 * time.Second

// catchUp waits until the scanner has delivered everything on disk of the
// sessions it follows (a pass made at once), however long that takes, or
// until ctx ends (false). A session that remote mode resumes is rebuilt so:
// the scanner's records before its cursor (sent by an earlier run) give
// the mapper the open turn and calls, and only then may remote mode map
// what the resumed Claude prints. Once remote mode has the session, the
// hold (Pipeline.holdRemote) passes those records over: a pass that came
// late left the mapper knowing nothing of the session, and the phone then
// differed from replay (a turn left open beside the next, a call running
// for ever, the wrong cut). A switch from the terminal waits the same way
// for what the terminal's Claude wrote last. After catchUpNotice the
// terminal and the log are told that remote mode waits for it.
func (l *loop) catchUp(ctx context.Context) bool {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.o.Scanner.Flush(fctx) }()
	slow := time.NewTimer(catchUpNotice)
	defer slow.Stop()
	began := time.Now()
	for {
		select {
		case <-slow.C:
			fmt.Fprintf(l.o.Notice, "ccrelay: still reading what session %s wrote before; the app's prompts wait until it is read.\r\n", l.session)
			l.o.Logger.Warn("remote mode waits for the scanner to read the session's transcript", "session", l.session,
				"waited", time.Since(began).Round(time.Millisecond))
		case err := <-done:
			if ctx.Err() != nil {
				return false
			}
			if err != nil {
				// The scanner stopped: nothing more of it comes.
				l.o.Logger.Warn("the scanner did not read the session's transcript before remote mode", "session", l.session, "err", err)
			} else if d := time.Since(began); d >= catchUpNotice {
				l.o.Logger.Info("the scanner read the session's transcript; remote mode goes on", "session", l.session,
					"took", d.Round(time.Millisecond))
			}
			return true
		}
	}
}

// remote drives the session from the app, starting with the command that
// took it over (if any), until it is taken back to the terminal (true) or
// ctx ends (false).
func (l *loop) remote(ctx context.Context, first *Command) (bool, error) {
	ro := l.o.Remote
	if ro.Claude == "" {
		ro.Claude = l.o.Local.Claude
	}
	if ro.Dir == "" {
		ro.Dir = l.o.Local.Dir
	}
	if ro.Env == nil {
		ro.Env = l.o.Local.Env
	}
	if ro.Args == nil {
		ro.Args = l.o.Local.Args // the setting-like ones are kept (RemoteArgs)
	}
	if ro.Logger == nil {
		ro.Logger = l.o.Logger
	}
	ro.Resume = l.resumed
	if ro.ProjectDir == "" && l.projectDir != "" {
		// Where Claude really writes: its transcript tells whether the
		// session has anything to resume (a Claude that started in the
		// terminal, its hook run, and got no prompt has none:
		// --resume would be refused).
		ro.ProjectDir, ro.Resume = l.projectDir, false
	}
	// A /clear moves the session to Claude's new one, as in local mode:
	// remote mode maps it, and the scanner follows its transcript.
	ro.OnSession = func(id string) {
		l.o.Pipeline.SetRemote(id, true)
		if l.o.Scanner != nil {
			l.o.Scanner.AddSessionPath(id, "")
		}
	}
	l.o.Pipeline.SetRemote(l.session, true)
	r := NewRemote(l.session, ro, l.o.Pipeline, l.o.Events)
	l.publish(r.State())
	var keys <-chan struct{}
	var restore func()
	kctx, stopKeys := context.WithCancel(ctx)
	defer stopKeys()
	if l.o.Keys != nil {
		fmt.Fprint(l.o.Notice, "\r\nccrelay: this session is now controlled from the app. Press space twice to take it back here.\r\n")
		restore = rawMode(l.o.Keys)
		keys = watchKeys(kctx, l.o.Keys)
	}
	finish := func(status protocol.TurnStatus) {
		stopKeys()
		r.Stop(status)
		if restore != nil {
			restore()
		}
		if id := r.ID(); id != l.session {
			// Claude moved to a new session (/clear): local mode and the
			// next remote stint go on with it.
			l.session, l.resumed = id, false
		}
		l.resumed = l.resumed || r.started()
		l.o.Pipeline.SetRemote(l.session, false)
	}
	w := newOrdered(ctx, r)
	finish = func(finishRemote func(protocol.TurnStatus)) func(protocol.TurnStatus) {
		return func(status protocol.TurnStatus) {
			w.stop()             // nothing more is written to Claude
			finishRemote(status) // Claude ends: what waits for it returns
			w.waits.Wait()
		}
	}(finish)
	if first != nil && first.Kind == protocol.CommandPrompt {
		w.push(*first)
	} else if first != nil {
		first.Reply(nil)
	}
	for {
		var c Command
		select {
		case <-ctx.Done():
			if c, ok := l.stopCut(); ok {
				stopKeys()
				w.stop()
				cut := r.StopCut(c)
				w.waits.Wait()
				finish(protocol.StatusCancelled) // Claude stopped already
				if l.o.Stopped != nil {
					l.o.Stopped(cut)
				}
				return false, nil
			}
			finish(protocol.StatusCancelled)
			return false, nil
		case <-keys:
			finish(protocol.StatusCancelled)
			fmt.Fprint(l.o.Notice, "ccrelay: back in the terminal.\r\n")
			return true, nil
		case c = <-l.o.Commands:
			if !l.fresh(c) {
				continue
			}
		}
		switch c.Kind {
		case protocol.CommandPrompt, protocol.CommandModel, protocol.CommandPermissionMode:
			// In arrival order, through the session's one writer.
			w.push(c)
		case protocol.CommandPermission:
			c.Reply(r.Answer(c.RequestID, c.Allow, c.Input, c.ForSession, c.Reason))
		case protocol.CommandAbort:
			c.Reply(r.Interrupt(ctx))
		case protocol.CommandStopTask:
			// Claude's answer is waited for beside the loop.
			w.waits.Go(func() { c.Reply(r.StopTask(ctx, c.Subagent)) })
		case protocol.CommandSwitch:
			if c.Mode != "local" {
				c.Reply(nil)
				continue
			}
			if l.o.Keys == nil {
				c.Reply(errors.New("no terminal to take the session back to: ccrelay runs headless"))
				continue
			}
			finish(protocol.StatusCancelled)
			c.Reply(nil)
			return true, nil
		default:
			c.Reply(fmt.Errorf("unknown command %q", c.Kind))
		}
	}
}

// MaxOrderedCommands bounds the prompts and settings waiting for the
// session's writer; one more is rejected at once.
const MaxOrderedCommands = 256

// MaxUntakenPrompts bounds the prompts written to Claude that it has not
// taken yet (echoed): the writer waits before writing one more, and
// commands wait in its queue (MaxOrderedCommands) meanwhile. A prompt is
// done when Claude took it, however long the turns before it run; it fails
// when Claude ends first, never on a timer.
const MaxUntakenPrompts = 64

// ordered is the session's one writer of prompts and settings: a FIFO that
// writes each command to Claude's stdin in arrival order. Only the wait for
// Claude to take it, and the reply, run asynchronously.
type ordered struct {
	ctx        context.Context // the session's: a setting's wait ends with it, a prompt's with Claude
	stopWrites context.CancelFunc
	r          orderedRemote
	fifo       chan Command
	untaken    chan struct{}  // a token per prompt written and not taken (MaxUntakenPrompts)
	done       chan struct{}  // run returned
	waits      sync.WaitGroup // the waits for Claude's answers
}

// orderedRemote is what the writer needs of a Remote.
type orderedRemote interface {
	SendPrompt(text string) (func(context.Context) error, error)
	SendModel(model string) (func(context.Context) error, error)
	SendPermissionMode(mode string) (func(context.Context) error, error)
}

func newOrdered(ctx context.Context, r orderedRemote) *ordered {
	wctx, cancel := context.WithCancel(ctx)
	w := &ordered{ctx: ctx, stopWrites: cancel, r: r, fifo: make(chan Command, MaxOrderedCommands),
		untaken: make(chan struct{}, MaxUntakenPrompts), done: make(chan struct{})}
	go w.run(wctx)
	return w
}

// errTooManyOrdered is the reason given for a command past
// MaxOrderedCommands.
var errTooManyOrdered = fmt.Errorf("%d commands already wait to reach Claude; send it again later", MaxOrderedCommands)

// push queues c behind the commands before it, or rejects it when the
// queue is full. Called from one goroutine (the loop).
func (w *ordered) push(c Command) {
	select {
	case w.fifo <- c:
	default:
		c.Reply(errTooManyOrdered)
	}
}

func (w *ordered) run(ctx context.Context) {
	defer close(w.done)
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-w.fifo:
			if c.Kind == protocol.CommandPrompt {
				select {
				case w.untaken <- struct{}{}:
				case <-ctx.Done():
					c.Reply(ErrClosed)
					return
				}
			}
			w.write(c)
		}
	}
}

// write sends one command to Claude; the wait for Claude's answer and the
// reply go on in the background, owned by w.
func (w *ordered) write(c Command) {
	var wait func(context.Context) error
	var err error
	timeout := ControlTimeout
	switch c.Kind {
	case protocol.CommandPrompt:
		wait, err = w.r.SendPrompt(c.Text)
		timeout = 0
		defer func() {
			if err != nil {
				<-w.untaken
			}
		}()
	case protocol.CommandModel:
		wait, err = w.r.SendModel(c.Model)
	case protocol.CommandPermissionMode:
		wait, err = w.r.SendPermissionMode(c.Mode)
	default:
		err = fmt.Errorf("unknown command %q", c.Kind)
	}
	if err != nil {
		c.Reply(err)
		return
	}
	w.waits.Go(func() {
		ctx, cancel := w.ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			ctx, cancel = context.WithTimeout(w.ctx, timeout)
		}
		if c.Kind == protocol.CommandPrompt {
			// A prompt's outcome is Claude's: taken or not, it is known
			// when Claude echoes it or ends (the session's end stops
			// Claude before it waits for this), never when ccrelay is
			// told to stop: Claude may have it in its transcript then.
			ctx = context.WithoutCancel(w.ctx)
		}
		defer cancel()
		err := wait(ctx)
		if c.Kind == protocol.CommandPrompt {
			<-w.untaken
		}
		c.Reply(err)
	})
}

// stop ends the writer: what was not written yet is rejected. The waits
// for what was written go on until Claude answers or ends (wait for them
// with w.waits after stopping Claude).
func (w *ordered) stop() {
	w.stopWrites()
	<-w.done
	for {
		select {
		case c := <-w.fifo:
			c.Reply(ErrClosed)
		default:
			return
		}
	}
}

// rawMode puts a terminal in raw mode (keys arrive one by one) and returns
// the undo; for anything else it does nothing.
func rawMode(f *os.File) func() {
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return func() {}
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return func() {}
	}
	return func() { _ = term.Restore(fd, old) }
}

// stopCut is the cut LoopOptions.StopCut gives, if any.
func (l *loop) stopCut() (mapper.Cut, bool) {
	if l.o.StopCut == nil {
		return mapper.Cut{}, false
	}
	return l.o.StopCut()
}
