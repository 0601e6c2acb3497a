package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// What the app sees of a Codex remote session is what replay of its
// rollout gives: app-server writes the thread's rollout as local Codex
// does, and remote mode follows that file (scanner.CodexFollower) into
// the session's CodexPipeline, the same mapper replay uses. app-server's
// notifications serve control only: the turn's state, approvals, live
// typing (item/agentMessage/delta). ccrelay's own notes (a request
// declined, a denial's reason) go into the same pipeline, after what the
// follower read of the rollout: they are not in the rollout, so replay
// does not have them.

// CodexLoopOptions configure RunCodexRemote.
type CodexLoopOptions struct {
	Remote CodexRemoteOptions
	// Pipeline maps the rollout and the notes into the outbox; Follower
	// (run by the caller, with Pipeline as its sink) follows the rollout.
	Pipeline *CodexPipeline
	Follower *scanner.CodexFollower
	Commands <-chan Command
	Events   RemoteEvents
	// OnThread is told the thread id once app-server started the thread,
	// before anything of the session is sent.
	OnThread func(thread string)
	// Ledger, when set, records each command's outcome durably (in the
	// run's state folder): a command delivered again, by this process or
	// by a ccrelay started after it ended, is answered with its recorded
	// outcome and never carried out twice. Without it repeats are caught
	// in memory only.
	Ledger *Ledger
	Logger *slog.Logger
}

// MaxCodexQueuedPrompts bounds the prompts waiting for the one before
// them to reach Codex; one more is rejected.
const MaxCodexQueuedPrompts = MaxOrderedCommands

// RunCodexRemote runs a Codex session driven from the app until ctx ends:
// app-server and the thread start at once, then the app's commands are
// carried out. app-server does not outlive it.
func RunCodexRemote(ctx context.Context, o CodexLoopOptions) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Remote.Logger = o.Logger
	notes := &codexNotes{p: o.Pipeline, f: o.Follower, ev: o.Events, log: o.Logger, in: make(chan codexNote, 256), done: make(chan struct{})}
	var events RemoteEvents
	if o.Events != nil {
		events = notes
	}
	r := NewCodexRemote(o.Remote, notes, events)
	defer func() {
		r.Stop()
		notes.close()
	}()
	go notes.run()
	thread, err := r.Start(ctx)
	if err != nil {
		return err
	}
	if o.OnThread != nil {
		o.OnThread(thread)
	}
	if p := r.RolloutPath(); p != "" && o.Follower != nil {
		o.Follower.Follow(p)
	}
	if o.Events != nil {
		o.Events.State(thread, r.State())
	}
	// Prompts reach Codex one at a time, in the order they came.
	prompts := make(chan Command, MaxCodexQueuedPrompts)
	writerDone := make(chan struct{})
	wctx, stopWriter := context.WithCancel(ctx)
	go func() {
		defer close(writerDone)
		for {
			select {
			case <-wctx.Done():
				return
			case c := <-prompts:
				err := r.Prompt(wctx, c.Text)
				if err == nil {
					crashpoint.Hit(crashpoint.CodexPromptTaken)
				}
				if err == nil && o.Follower != nil {
					// The rollout exists once the first turn started.
					if p := r.RolloutPath(); p != "" {
						o.Follower.Follow(p)
					}
				}
				c.Reply(err)
			}
		}
	}()
	defer func() {
		stopWriter()
		<-writerDone
		for {
			select {
			case c := <-prompts:
				c.Reply(ErrCodexStopped)
			default:
				return
			}
		}
	}()
	seen := map[string]bool{}
	var seenQ []string
	for {
		var c Command
		select {
		case <-ctx.Done():
			return nil
		case c = <-o.Commands:
		}
		if c.ID != "" {
			if seen[c.ID] {
				continue
			}
			if o.Ledger != nil {
				var run bool
				if c, run = ledgerCommand(o.Ledger, c, r.RolloutPath, o.Logger); !run {
					continue
				}
			}
			seen[c.ID] = true
			if seenQ = append(seenQ, c.ID); len(seenQ) > MaxSeenCommands {
				delete(seen, seenQ[0])
				seenQ = seenQ[1:]
			}
		}
		switch c.Kind {
		case protocol.CommandPrompt:
			select {
			case prompts <- c:
			default:
				c.Reply(fmt.Errorf("%d prompts already wait to reach Codex; send it again later", MaxCodexQueuedPrompts))
			}
		case protocol.CommandPermission:
			c.Reply(r.Answer(c.RequestID, c.Allow, c.Input, c.ForSession, c.Reason))
		case protocol.CommandAbort:
			actx, cancel := context.WithTimeout(ctx, ControlTimeout)
			err := r.Interrupt(actx)
			cancel()
			c.Reply(err)
		case protocol.CommandModel:
			c.Reply(r.SetModel(c.Model))
		case protocol.CommandPermissionMode:
			c.Reply(errors.New("a Codex session has no permission modes: Codex asks for each command and change it cannot run in its sandbox"))
		case protocol.CommandSwitch:
			if c.Mode == "local" {
				c.Reply(fmt.Errorf("no terminal to take the session back to: run codex resume %s in the terminal", thread))
				continue
			}
			c.Reply(nil)
		case protocol.CommandStopTask:
			c.Reply(errors.New("Codex's subagents cannot be stopped one by one; abort stops the turn"))
		default:
			c.Reply(fmt.Errorf("unknown command %q", c.Kind))
		}
	}
}

// ledgerCommand checks c against the ledger: a command seen before is
// answered with its recorded outcome (one still being carried out is left
// to its own answer; one a ccrelay began and never ended, with what the
// thread's rollout, at the path rollout gives, says became of it:
// codexInterrupted), and run false; a new one is recorded as begun (a
// prompt or an answer with the rollout's size), and comes back with a
// Reply that records its outcome before answering. A command the ledger
// could not record is refused: carried out unrecorded, it could run twice.
func ledgerCommand(l *Ledger, c Command, rollout func() string, log *slog.Logger) (Command, bool) {
	var fresh bool
	var outcome, err error
	if codexLedgered(c) {
		fresh, outcome, err = l.BeginPrompt(c.ID, rolloutSize(rollout()))
	} else {
		fresh, outcome, err = l.Begin(c.ID)
	}
	switch {
	case err != nil:
		c.Reply(fmt.Errorf("ccrelay could not record the command: %w", err))
		return c, false
	case !fresh && errors.Is(outcome, ErrInProgress):
		return c, false
	case !fresh && errors.Is(outcome, ErrInterrupted):
		// Recorded, so that a later repeat is answered the same.
		outcome = codexInterrupted(l, c, rollout())
		log.Info("codex remote: a command begun before ccrelay stopped", "id", c.ID, "kind", c.Kind, "outcome", errString(outcome))
		if lerr := l.Finish(c.ID, outcome); lerr != nil {
			log.Error("codex remote: could not record a command's outcome", "id", c.ID, "err", lerr)
		}
		c.Reply(outcome)
		return c, false
	case !fresh:
		c.Reply(outcome)
		return c, false
	}
	reply := c.Reply
	c.Reply = func(err error) {
		if lerr := l.Finish(c.ID, err); lerr != nil {
			log.Error("codex remote: could not record a command's outcome", "id", c.ID, "err", lerr)
		}
		reply(err)
	}
	return c, true
}

// codexNote is a note waiting for the pipeline, or a state for the app.
type codexNote struct {
	session, source, text string
	time                  int64
	state                 *SessionState
}

// codexNotes puts CodexRemote's notes into the pipeline, and tells the
// app its states, in order, from a goroutine of its own (CodexRemote's
// queue must not block): a note, and a state with a request waiting,
// after what the follower has read of the rollout by then, so that a note
// lands in the turn it is about and a request comes after the call it
// names, when Codex wrote that call first.
type codexNotes struct {
	mu     sync.Mutex
	closed bool
	p      *CodexPipeline
	ev     RemoteEvents
	f      *scanner.CodexFollower
	log    *slog.Logger
	in     chan codexNote
	done   chan struct{}
}

// MaxCodexNoteWait bounds the wait for the follower before a note.
const MaxCodexNoteWait = 5 * time.Second

func (n *codexNotes) Note(_ context.Context, session, source, text string, nowMS int64) error {
	n.put(codexNote{session: session, source: source, text: text, time: nowMS})
	return nil
}

// State implements RemoteEvents.
func (n *codexNotes) State(session string, st SessionState) {
	n.put(codexNote{session: session, state: &st})
}

// Live implements RemoteEvents: live deltas go at once.
func (n *codexNotes) Live(session string, payload json.RawMessage) { n.ev.Live(session, payload) }

func (n *codexNotes) put(note codexNote) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		if note.state != nil && n.ev != nil {
			n.ev.State(note.session, *note.state) // the last state, as Stop leaves it
		}
		return
	}
	select {
	case n.in <- note:
	default:
		// Full: the goroutine is stuck on the pipeline; wait for room
		// rather than lose a state or a note.
		n.log.Warn("codex remote: notes and states wait for the outbox", "session", note.session)
		n.in <- note
	}
}

func (n *codexNotes) run() {
	defer close(n.done)
	for note := range n.in {
		if note.state != nil && len(note.state.Permissions) == 0 {
			n.ev.State(note.session, *note.state)
			continue
		}
		if n.f != nil {
			ctx, cancel := context.WithTimeout(context.Background(), MaxCodexNoteWait)
			if err := n.f.Flush(ctx); err != nil {
				n.log.Warn("codex remote: the rollout was not read before a note", "err", err)
			}
			cancel()
		}
		if note.state != nil {
			n.ev.State(note.session, *note.state)
			continue
		}
		if n.p == nil {
			continue
		}
		if err := n.p.Note(context.Background(), note.session, note.source, note.text, note.time); err != nil {
			n.log.Error("codex remote: could not store a note", "session", note.session, "err", err)
		}
	}
}

// close ends run once the notes queued are stored.
func (n *codexNotes) close() {
	n.mu.Lock()
	n.closed = true
	close(n.in)
	n.mu.Unlock()
	<-n.done
}

// codexNoter is a CodexMapper that can note (mapper.Codex).
type codexNoter interface {
	Note(source, text string) []protocol.Envelope
}

var _ codexNoter = (*mapper.Codex)(nil)

// Note appends a note of ccrelay's to thread's session, in its open turn
// (or a turn of its own).
func (p *CodexPipeline) Note(ctx context.Context, thread, source, text string, _ int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.mapperFor(thread).(codexNoter)
	if !ok {
		return nil
	}
	return p.appendTo(ctx, thread, m.Note(source, text))
}
