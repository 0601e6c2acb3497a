package launcher

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/queue"
)

// Feed is where remote mode puts what Claude did: the session's mapper and
// outbox (Pipeline implements it).
type Feed interface {
	MapRecords(ctx context.Context, session string, recs []*claude.Record) error
	CloseTurn(ctx context.Context, session string, status protocol.TurnStatus, nowMS int64) error
	Cut(ctx context.Context, session string, c mapper.Cut, nowMS int64) error
	Note(ctx context.Context, session, source, text string, nowMS int64) error
}

// RemoteEvents receives what the app sees besides envelopes: the session's
// state and the live token deltas. Calls come from the session's goroutines
// in order; they must not block.
type RemoteEvents interface {
	State(session string, st SessionState)
	Live(session string, payload json.RawMessage)
}

// Session statuses.
const (
	StatusIdle       = "idle"
	StatusBusy       = "busy"
	StatusPermission = "waiting-for-permission"
)

// SessionState is what the app is told about a session besides its
// envelopes.
type SessionState struct {
	Mode           string              `json:"mode"`   // local | remote
	Status         string              `json:"status"` // idle | busy | waiting-for-permission
	Model          string              `json:"model,omitempty"`
	PermissionMode string              `json:"permissionMode,omitempty"`
	Permissions    []PermissionRequest `json:"permissions,omitempty"`
	// Usage of the last finished turn and CostUSD, the running total of the
	// Claude process (Claude's result).
	Usage   json.RawMessage `json:"usage,omitempty"`
	CostUSD float64         `json:"costUsd,omitempty"`
	// TurnCosts is what each of the last MaxTurnCosts turns cost, by turn
	// id, oldest first: the difference between Claude's running totals at
	// its end and at the end of the turn before.
	TurnCosts []TurnCost `json:"turnCosts,omitempty"`
	// Error says why Claude could not start or stopped, until the next
	// prompt.
	Error string `json:"error,omitempty"`
	// RateLimit is the account's rate limit as Claude last reported it
	// (remote mode).
	RateLimit *claude.RateLimitInfo `json:"rateLimit,omitempty"`
	// Tasks is what the running subagents do now, as Claude's
	// task_progress says (at most MaxTrackedProgress).
	Tasks []TaskProgress `json:"tasks,omitempty"`
	// Context is the context window's use after the last turn, as Claude
	// counts it (get_context_usage; remote mode, when Claude offers it).
	Context *ContextUsage `json:"context,omitempty"`
	// Ended says that nothing can run the session again (a Codex thread
	// Codex never wrote: CodexThreadGone), and ContinuedAs the session
	// that took its place, when one did. The app offers no way to resume
	// such a session.
	Ended       bool   `json:"ended,omitempty"`
	ContinuedAs string `json:"continuedAs,omitempty"`
}

// RemoteOptions configure a remote session.
type RemoteOptions struct {
	Claude string   // path or name of the claude binary ("claude")
	Args   []string // the user's arguments: the setting-like ones are passed (RemoteArgs)
	Dir    string
	Env    []string // nil: this process's environment; CCRELAY_* is never passed
	// ProjectDir is where Claude writes the session's transcripts ("":
	// found from Env's HOME and CLAUDE_CONFIG_DIR and Dir). Remote mode
	// reads foreground subagents' transcripts there (D22).
	ProjectDir string
	// Model and PermissionMode for the next start ("" = Claude's default).
	Model, PermissionMode string
	// AllowBypass lets the app switch Claude to bypassPermissions (every
	// tool runs without asking); off, such a command is rejected.
	AllowBypass bool
	// Resume: the session exists (--resume) even where no transcript of it
	// is found. Each start looks at the transcript: one that holds a message
	// is continued, none is created with --session-id (resumeSession).
	Resume bool
	// ToolHold is how long a top-level tool call waits in the outgoing
	// queue for a permission request or its result (default 250 ms).
	ToolHold time.Duration
	// StopTimeout is how long Claude gets to exit after its stdin closes
	// and after SIGTERM (default 5 s each).
	StopTimeout time.Duration
	// OnSession, if set, is told the new session id when Claude moves the
	// conversation to a new session (/clear), before anything of the new
	// session is sent. It is called from the session's reader goroutine.
	OnSession func(id string)
	Clock     queue.Clock
	Logger    *slog.Logger
}

// Remote drives Claude Code headless over stream-json for one session: a
// process started on the first prompt (and again after it dies), one reader
// of its stdout, the converter, the ordered outgoing queue, permission
// requests and the control protocol.
type Remote struct {
	id     string
	opts   RemoteOptions
	feed   Feed
	events RemoteEvents
	log    *slog.Logger
	conv   *Converter
	q      *queue.Queue[item]
	// sent is the last state told and target the session the queue's
	// items go to (it moves at a /clear), owned by deliver (the queue runs
	// one deliver at a time).
	sent   *SessionState
	target string
	// costs are the costs of the last turns, added by deliver once the
	// turn's end is stored; costMu is taken after mu, never before.
	costMu sync.Mutex
	costs  []TurnCost
	files  *subFiles  // owned by the reader goroutine
	book   *usageBook // owned by the reader goroutine

	mu      sync.Mutex
	proc    *process
	state   SessionState
	pending []*PermissionRequest
	// contextAsked: a get_context_usage is unanswered; contextRefused:
	// Claude does not answer it (not asked again).
	contextAsked, contextRefused bool
	// tasks are the background subagents running: subagent id -> Claude's
	// task id (what stop_task names); at most MaxTrackedTasks.
	tasks map[string]string
	// taskIDs names the task of each subagent in state.Tasks.
	taskIDs map[string]string
	// taskCalls is the Agent call of each subagent in tasks; stopping the
	// calls of tasks ccrelay asked Claude to stop, and stash the end of
	// such a task, held until its interruption line (beforeMessage).
	taskCalls map[string]string
	stopping  map[string]bool
	stash     map[string][]*claude.Record
	// Turns as Claude's own stream shows them: one opens on the first
	// main-chain message after an idle result (a prompt's, or one Claude
	// starts by itself after a background task) and closes on result.
	// queued counts the prompts written that no turn took yet.
	turnOpen    bool
	queued      int
	interrupted bool
	nextReq     int
	waiters     map[string]waiter
	closed      bool
	// msg holds the blocks of the assistant message being streamed until
	// its message_delta brings the final usage (msgID is its id).
	msg      []*claude.StreamMessage
	msgID    string
	deferred []deferred // what Claude printed meanwhile (MaxDeferredLines)
	// initSeen: Claude printed its init (what tells that Claude has the
	// session when its transcript cannot be looked at).
	initSeen bool
	// crashAt is the size of the main transcript when Claude was started
	// to continue it (-1: it was not, or its repair was read); repaired
	// holds the uuids sent from there.
	crashAt  int64
	repaired map[string]bool
	// onLine, set by tests before the first prompt, sees each line Claude
	// prints as the reader reads it (to stop Claude at a given one).
	onLine func(*process, *claude.StreamMessage)
	// streaming is the id of the main agent's message whose message_start
	// Claude printed: only then does a message_delta follow.
	streaming string
	// cmdAt is the size of the main transcript when a slash command was
	// written to Claude (-1: none waits): what Claude records of it and
	// does not print is read from there (remote_slash.go).
	cmdAt int64
	// clearCmd is the /clear command Claude took, for the session it moves
	// to next (remote_slash.go).
	clearCmd *claude.Record
}

// item is one entry of the outgoing queue.
type item struct {
	recs   []*claude.Record
	note   string // a service message of our own
	source string // the note's identity
	// session moves the items after it to another session (/clear).
	session string
	close   protocol.TurnStatus
	cut     *mapper.Cut // the turn Claude left unfinished
	// stop: recs are what Claude printed while being stopped; only those
	// its transcript holds go out (remote_stopout.go).
	stop  *stopOutput
	cost  float64 // with close: what the turn cost (USD), 0 when unknown
	time  int64
	state *SessionState // the session's state, told to the app in turn
}

// NewRemote returns the remote driver of session id. Nothing starts until
// the first prompt.
func NewRemote(id string, opts RemoteOptions, feed Feed, events RemoteEvents) *Remote {
	if opts.Claude == "" {
		opts.Claude = "claude"
	}
	if opts.ToolHold <= 0 {
		opts.ToolHold = 250 * time.Millisecond
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Remote{id: id, target: id, opts: opts, feed: feed, events: events, log: opts.Logger, conv: NewConverter(id),
		waiters: map[string]waiter{}, crashAt: -1, cmdAt: -1, repaired: map[string]bool{}, tasks: map[string]string{}, taskIDs: map[string]string{},
		taskCalls: map[string]string{}, stopping: map[string]bool{}, stash: map[string][]*claude.Record{},
		state: SessionState{Mode: "remote", Status: StatusIdle, Model: opts.Model, PermissionMode: opts.PermissionMode}}
	r.q = queue.New(r.deliver, opts.Clock)
	if r.opts.ProjectDir == "" {
		r.opts.ProjectDir = projectDirFor(opts.Env, opts.Dir)
	}
	r.files = newSubFiles(r.opts.ProjectDir, id, SubagentFileWait, opts.Logger)
	r.book = newUsageBook(SubagentFileWait)
	return r
}

// projectDirFor is where Claude started in dir with environment env (nil:
// this process's) writes its transcripts; "" when that cannot be told.
func projectDirFor(env []string, dir string) string {
	getenv := os.Getenv
	if env != nil {
		getenv = func(k string) string {
			v := ""
			for _, kv := range env {
				if strings.HasPrefix(kv, k+"=") {
					v = kv[len(k)+1:]
				}
			}
			return v
		}
	}
	home := getenv("HOME")
	if home == "" {
		return ""
	}
	// Claude names the folder after its working directory as the system
	// gives it, symbolic links resolved.
	if real, err := filepath.EvalSymlinks(cmp.Or(dir, ".")); err == nil {
		dir = real
	}
	d, err := claude.ProjectDir(claude.ConfigDir(getenv, home), dir)
	if err != nil {
		return ""
	}
	return d
}

// started reports whether Claude has the session (hasSession).
func (r *Remote) started() bool { return r.hasSession() }

// ID is the session id: Claude's, which a /clear changes.
func (r *Remote) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id
}

// State returns the session's current state.
func (r *Remote) State() SessionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot()
}

func (r *Remote) snapshot() SessionState {
	st := r.state
	r.costMu.Lock()
	st.TurnCosts = slices.Clone(r.costs)
	r.costMu.Unlock()
	st.Permissions = nil
	for _, p := range r.pending {
		st.Permissions = append(st.Permissions, *p)
	}
	st.Permissions = shownPermissions(st.Permissions)
	switch {
	case len(r.pending) > 0:
		st.Status = StatusPermission
	case r.turnOpen || r.queued > 0:
		st.Status = StatusBusy
	default:
		st.Status = StatusIdle
	}
	return st
}

// publish tells the app the state, in the same ordered queue as what
// Claude did: a state never goes out before the envelopes before it (a
// permission request before its tool call, usage before its turn-end).
// Called with mu held.
func (r *Remote) publish() {
	if r.events != nil {
		st := r.snapshot()
		r.q.Push(item{state: &st})
	}
}

// deliver hands queue items to the feed, in order.
func (r *Remote) deliver(items []item) {
	ctx := context.Background()
	for _, it := range items {
		var err error
		switch {
		case it.session != "":
			r.target = it.session
		case len(it.recs) > 0:
			recs := it.recs
			if it.stop != nil {
				var dropped int
				if recs, dropped = it.stop.keep(recs); dropped > 0 {
					r.log.Info("remote: Claude printed as it was stopped what its transcript does not hold; not sent", "session", r.target, "records", dropped)
				}
			}
			if len(recs) > 0 {
				err = r.feed.MapRecords(ctx, r.target, recs)
			}
		case it.note != "":
			err = r.feed.Note(ctx, r.target, it.source, it.note, it.time)
		case it.cut != nil:
			err = r.feed.Cut(ctx, r.target, *it.cut, it.time)
		case it.close != "":
			turn := ""
			if tf, ok := r.feed.(turnFeed); ok && it.cost > 0 {
				turn = tf.OpenTurn(r.target)
			}
			err = r.feed.CloseTurn(ctx, r.target, it.close, it.time)
			if err == nil && turn != "" {
				r.costMu.Lock()
				r.costs = append(r.costs, TurnCost{Turn: turn, USD: it.cost})
				if len(r.costs) > MaxTurnCosts {
					r.costs = slices.Delete(r.costs, 0, len(r.costs)-MaxTurnCosts)
				}
				costs := slices.Clone(r.costs)
				r.costMu.Unlock()
				if r.events != nil && r.sent != nil {
					st := *r.sent
					st.TurnCosts = costs
					r.events.State(r.target, st)
				}
			}
		case it.state != nil:
			st := *it.state
			r.sent = &st
			r.events.State(r.target, st)
		}
		if err != nil {
			r.log.Error("remote: could not store what Claude did", "session", r.target, "err", err)
		}
	}
}

// ErrClosed is returned by a Remote after Stop.
var ErrClosed = errors.New("the remote session is stopped")

// Prompt sends a prompt, starting Claude first if it is not running. It
// returns once Claude took the prompt, or with why it could not.
func (r *Remote) Prompt(ctx context.Context, text string) error {
	wait, err := r.SendPrompt(text)
	if err != nil {
		return err
	}
	return wait(ctx)
}

// SendPrompt writes a prompt to Claude's stdin, starting Claude first if
// it is not running, and returns at once: prompts sent one after another
// reach Claude in that order. wait returns once Claude took the prompt, or
// with why it could not.
func (r *Remote) SendPrompt(text string) (wait func(context.Context) error, err error) {
	return r.sendPrompt(text, MaxPromptRetakes)
}

// sendPrompt is SendPrompt; a prompt the Claude it was written to ended
// without taking is given to the next Claude at most retakes more times.
func (r *Remote) sendPrompt(text string, retakes int) (wait func(context.Context) error, err error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	p := r.proc
	if p == nil {
		var err error
		if p, err = r.start(); err != nil {
			r.state.Error = err.Error()
			r.publish()
			r.mu.Unlock()
			return nil, err
		}
	}
	r.state.Error = ""
	r.queued++
	r.publish()
	r.noteCommand(text)
	r.mu.Unlock()
	n, err := p.writePrompt(text)
	if err != nil {
		r.mu.Lock()
		if r.proc == p && r.queued > 0 {
			r.queued--
			r.publish()
		}
		r.mu.Unlock()
		if retakes > 0 && !p.stopping.Load() && p.ended() {
			// Claude died as the prompt was written: it goes to the
			// next Claude.
			return func(ctx context.Context) error { return r.retakeUnwritten(ctx, p, text, retakes) }, nil
		}
		return nil, fmt.Errorf("send the prompt to Claude: %w", err)
	}
	return func(ctx context.Context) error {
		// Claude echoes each prompt (--replay-user-messages, isReplay) once
		// it took it, in the order written: this one is taken when the
		// n-th echo came, or when Claude ended with it in its transcript
		// (takenAtExit). A prompt Claude ended without was not taken: it
		// goes to the next Claude (retake), or fails with why.
		for {
			taken, next := p.echoedUpTo(n)
			if taken {
				return nil
			}
			select {
			case <-next:
			case <-p.exited:
				if taken, _ := p.echoedUpTo(n); taken {
					return nil
				}
				return r.retake(ctx, p, n, retakes)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}, nil
}

// start runs Claude. Called with mu held.
func (r *Remote) start() (*process, error) {
	args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", "--replay-user-messages", "--permission-prompt-tool", "stdio"}
	if !ValidSessionID(r.id) {
		return nil, fmt.Errorf("session id %q is not a UUID", clip(r.id, 100))
	}
	resume, err := r.resumeSession()
	if err != nil {
		return nil, err
	}
	// One argv item per option: no value can become a flag.
	if resume {
		args = append(args, "--resume="+r.id)
		r.markResume()
	} else {
		args = append(args, "--session-id="+r.id)
		r.crashAt = -1 // a new session: nothing to repair
	}
	if r.state.Model != "" {
		if err := CheckModel(r.state.Model); err != nil {
			return nil, err
		}
		args = append(args, "--model="+r.state.Model)
	}
	if r.state.PermissionMode != "" {
		// bypassPermissions here was chosen in the terminal or allowed
		// when the app chose it (SetPermissionMode).
		if err := CheckPermissionMode(r.state.PermissionMode, true); err != nil {
			return nil, err
		}
		args = append(args, "--permission-mode="+r.state.PermissionMode)
	}
	// The user's setting-like options, minus those the app changed since.
	var set []string
	if r.state.Model != "" {
		set = append(set, "--model")
	}
	if r.state.PermissionMode != "" {
		set = append(set, "--permission-mode")
	}
	args = append(args, RemoteArgs(r.opts.Args, set...)...)
	at := int64(-1)
	if r.opts.ProjectDir != "" {
		at = 0
		if fi, err := os.Stat(claude.TranscriptPath(r.opts.ProjectDir, r.id)); err == nil {
			at = fi.Size()
		}
	}
	p, err := startProcess(r.opts.Claude, args, r.opts.Dir, r.opts.Env)
	if err != nil {
		return nil, err
	}
	p.transcriptAt, p.startAt = at, at
	r.proc = p
	r.log.Info("remote: started claude", "session", r.id, "pid", p.cmd.Process.Pid, "resume", resume)
	go r.read(p)
	return p, nil
}

// Stop ends the session's Claude process, if any: the open turn (if any)
// is closed with status (cancelled when the user takes the session back,
// say), after everything queued. Claude never outlives Stop.
func (r *Remote) Stop(status protocol.TurnStatus) {
	r.StopCut(mapper.Cut{Status: status, Result: claude.InterruptedForToolText, OnlyOpen: true})
}

// StopCut is Stop with the cut that ends the open turn (its status, the
// result of the calls left open, the note saying why); it reports whether
// a turn was open and cut so.
func (r *Remote) StopCut(c mapper.Cut) (cut bool) {
	c.OnlyOpen = true
	r.mu.Lock()
	r.closed = true
	p := r.proc
	r.mu.Unlock()
	if p != nil {
		p.stop(r.opts.StopTimeout)
		<-p.done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushStash()
	cut = r.turnOpen
	if r.turnOpen {
		// The calls Claude left end as the cut says, with the ids the
		// next Claude's repair of them maps to (mapper.Cut).
		r.conv.Closed("")
		r.q.Push(item{cut: &c, time: time.Now().UnixMilli()})
	}
	r.q.Close()
	r.turnOpen, r.queued, r.pending = false, 0, nil
	return cut
}
