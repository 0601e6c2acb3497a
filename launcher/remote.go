package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/lines"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/queue"
)

// Feed is where remote mode puts what Claude did: the session's mapper and
// outbox (Pipeline implements it).
type Feed interface {
	MapRecords(ctx context.Context, session string, recs []*claude.Record) error
	CloseTurn(ctx context.Context, session string, status protocol.TurnStatus, nowMS int64) error
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
}

// MaxTurnCosts bounds the turns whose cost the state carries.
const MaxTurnCosts = 64

// TurnCost is what one turn cost, in US dollars as Claude counts it.
type TurnCost struct {
	Turn string  `json:"turn"`
	USD  float64 `json:"usd"`
}

// turnFeed is a Feed that can say which turn is open (the Pipeline).
type turnFeed interface {
	OpenTurn(session string) string
}

// TaskProgress is a running subagent's progress.
type TaskProgress struct {
	Subagent    string `json:"subagent"` // its envelopes' subagent id
	Description string `json:"description,omitempty"`
	LastTool    string `json:"lastTool,omitempty"` // the tool it used last
	Tokens      int64  `json:"tokens,omitempty"`
	ToolUses    int64  `json:"toolUses,omitempty"`
}

// MaxTrackedProgress bounds the subagents whose progress the state shows.
const MaxTrackedProgress = 16

// progress updates the state from task_progress, and drops a task that
// ended. Called with mu held.
func (r *Remote) progress(subtype string, sys *claude.System) {
	sub := ""
	if sys.ToolUseID != "" {
		sub = protocol.SubagentID(sys.ToolUseID)
	}
	idx := -1
	for i, t := range r.state.Tasks {
		if t.Subagent == sub || (sub == "" && r.taskIDs[t.Subagent] == sys.TaskID) {
			idx = i
		}
	}
	switch {
	case subtype == claude.SystemTaskProgress && sub != "":
		var u struct {
			Tokens   int64 `json:"total_tokens"`
			ToolUses int64 `json:"tool_uses"`
		}
		json.Unmarshal(sys.TaskUsage, &u)
		t := TaskProgress{Subagent: sub, Description: clip(sys.Description, 200), LastTool: clip(sys.LastToolName, 64), Tokens: u.Tokens, ToolUses: u.ToolUses}
		r.taskIDs[sub] = sys.TaskID
		switch {
		case idx >= 0:
			r.state.Tasks[idx] = t
		case len(r.state.Tasks) < MaxTrackedProgress:
			r.state.Tasks = append(r.state.Tasks, t)
		default:
			return
		}
	case subtype == claude.SystemTaskNotification || subtype == claude.SystemTaskUpdated && claude.TaskTerminal(sys.Patch.Status):
		if idx < 0 {
			return
		}
		delete(r.taskIDs, r.state.Tasks[idx].Subagent)
		r.state.Tasks = slices.Delete(r.state.Tasks, idx, idx+1)
	default:
		return
	}
	r.publish()
}

// ContextUsage is what Claude's get_context_usage says, bounded: the
// tokens used and the window, and the largest categories of use.
type ContextUsage struct {
	UsedTokens int64             `json:"usedTokens"`
	MaxTokens  int64             `json:"maxTokens"`
	Categories []ContextCategory `json:"categories,omitempty"` // at most MaxContextCategories
}

// ContextCategory is one kind of context use (system prompt, tools,
// messages, …).
type ContextCategory struct {
	Name   string `json:"name"`
	Tokens int64  `json:"tokens"`
}

// MaxContextCategories bounds the categories kept of a context usage.
const MaxContextCategories = 8

// parseContextUsage reads get_context_usage's answer; nil when it says
// nothing usable.
func parseContextUsage(raw json.RawMessage) *ContextUsage {
	var v struct {
		Categories []struct {
			Name   string `json:"name"`
			Tokens int64  `json:"tokens"`
			Kind   string `json:"kind"`
		} `json:"categories"`
		TotalTokens int64 `json:"totalTokens"`
		MaxTokens   int64 `json:"maxTokens"`
	}
	if json.Unmarshal(raw, &v) != nil || v.MaxTokens <= 0 || v.TotalTokens < 0 {
		return nil
	}
	u := &ContextUsage{UsedTokens: v.TotalTokens, MaxTokens: v.MaxTokens}
	for _, c := range v.Categories {
		if c.Kind == "used" && c.Tokens > 0 && len(u.Categories) < MaxContextCategories {
			u.Categories = append(u.Categories, ContextCategory{Name: clip(c.Name, 64), Tokens: c.Tokens})
		}
	}
	return u
}

// askContext asks Claude, after a turn, how full its context is; one
// question at a time, and never again once Claude refused (an older
// Claude Code does not know it). Called with mu held. The line is written
// beside the reader (which holds mu): it ends when written, or when
// Claude's stdin closes.
func (r *Remote) askContext() {
	p := r.proc
	if p == nil || r.contextAsked || r.contextRefused {
		return
	}
	r.contextAsked = true
	r.nextReq++
	id := "ccrelay-" + strconv.Itoa(r.nextReq)
	r.waiters[id] = waiter{ch: make(chan *claude.ControlResponse, 1), onResponse: func(resp *claude.ControlResponse) {
		r.contextAsked = false
		if resp.Response.Subtype != "success" {
			r.contextRefused = true
			return
		}
		if u := parseContextUsage(resp.Response.Response); u != nil {
			r.state.Context = u
			r.publish()
		}
	}}
	line := claude.ControlRequestLine(id, claude.ControlGetContextUsage, map[string]string{"detail": "summary"})
	go func() { _ = p.write(line) }()
}

// PermissionRequest is a tool use waiting for the app's answer.
type PermissionRequest struct {
	ID          string          `json:"id"` // Claude's request id: answer with it
	Tool        string          `json:"tool"`
	Input       json.RawMessage `json:"input,omitempty"`
	Description string          `json:"description,omitempty"`
	Call        string          `json:"call,omitempty"`     // the tool call (tool-call-start's call)
	Subagent    string          `json:"subagent,omitempty"` // set when a subagent asks
	BlockedPath string          `json:"blockedPath,omitempty"`
	// ForSession lists the rules that allowing "for this session" adds,
	// as Claude Code writes them ("Bash(npm test:*)"); empty when Claude
	// offered none (the whole tool is then allowed).
	ForSession []string `json:"forSession,omitempty"`

	suggestions json.RawMessage
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
	// Resume continues an existing session (--resume); otherwise the first
	// start creates it with --session-id.
	Resume bool
	// ToolHold is how long a top-level tool call waits in the outgoing
	// queue for a permission request or its result (default 250 ms).
	ToolHold time.Duration
	// StopTimeout is how long Claude gets to exit after its stdin closes
	// and after SIGTERM (default 5 s each).
	StopTimeout time.Duration
	Clock       queue.Clock
	Logger      *slog.Logger
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
	// sent is the last state told, owned by deliver (the queue runs one
	// deliver at a time).
	sent *SessionState
	// costs are the costs of the last turns, added by deliver once the
	// turn's end is stored; costMu is taken after mu, never before.
	costMu sync.Mutex
	costs  []TurnCost
	files  *subFiles // owned by the reader goroutine

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
	// crashAt is the size of the main transcript when Claude ended by
	// itself (-1: it did not); repaired holds the uuids sent from there.
	crashAt  int64
	repaired map[string]bool
	// streaming is the id of the main agent's message whose message_start
	// Claude printed: only then does a message_delta follow.
	streaming string
}

// item is one entry of the outgoing queue.
type item struct {
	recs   []*claude.Record
	note   string // a service message of our own
	source string // the note's identity
	close  protocol.TurnStatus
	cost   float64 // with close: what the turn cost (USD), 0 when unknown
	time   int64
	state  *SessionState // the session's state, told to the app in turn
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
	r := &Remote{id: id, opts: opts, feed: feed, events: events, log: opts.Logger, conv: NewConverter(id),
		waiters: map[string]waiter{}, crashAt: -1, repaired: map[string]bool{}, tasks: map[string]string{}, taskIDs: map[string]string{},
		taskCalls: map[string]string{}, stopping: map[string]bool{}, stash: map[string][]*claude.Record{},
		state: SessionState{Mode: "remote", Status: StatusIdle, Model: opts.Model, PermissionMode: opts.PermissionMode}}
	r.q = queue.New(r.deliver, opts.Clock)
	if r.opts.ProjectDir == "" {
		r.opts.ProjectDir = projectDirFor(opts.Env, opts.Dir)
	}
	r.files = newSubFiles(r.opts.ProjectDir, id, SubagentFileWait, opts.Logger)
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
	d, err := claude.ProjectDir(claude.ConfigDir(getenv, home), dir)
	if err != nil {
		return ""
	}
	return d
}

// started reports whether Claude has the session (it printed its init).
func (r *Remote) started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opts.Resume
}

// ID is the session id.
func (r *Remote) ID() string { return r.id }

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
		case len(it.recs) > 0:
			err = r.feed.MapRecords(ctx, r.id, it.recs)
		case it.note != "":
			err = r.feed.Note(ctx, r.id, it.source, it.note, it.time)
		case it.close != "":
			turn := ""
			if tf, ok := r.feed.(turnFeed); ok && it.cost > 0 {
				turn = tf.OpenTurn(r.id)
			}
			err = r.feed.CloseTurn(ctx, r.id, it.close, it.time)
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
					r.events.State(r.id, st)
				}
			}
		case it.state != nil:
			st := *it.state
			r.sent = &st
			r.events.State(r.id, st)
		}
		if err != nil {
			r.log.Error("remote: could not store what Claude did", "session", r.id, "err", err)
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
	r.mu.Unlock()
	n, err := p.writePrompt(claude.PromptLine(text))
	if err != nil {
		r.mu.Lock()
		if r.proc == p && r.queued > 0 {
			r.queued--
			r.publish()
		}
		r.mu.Unlock()
		return nil, fmt.Errorf("send the prompt to Claude: %w", err)
	}
	return func(ctx context.Context) error {
		// Claude echoes each prompt (--replay-user-messages, isReplay) once
		// it took it, in the order written: this one is taken when the
		// n-th echo came. A prompt still in the pipe when Claude dies was
		// not taken; say why.
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
				return fmt.Errorf("Claude Code stopped before taking the prompt: %s", p.reason())
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
	// One argv item per option: no value can become a flag.
	if r.opts.Resume {
		args = append(args, "--resume="+r.id)
	} else {
		args = append(args, "--session-id="+r.id)
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
	p, err := startProcess(r.opts.Claude, args, r.opts.Dir, r.opts.Env)
	if err != nil {
		return nil, err
	}
	r.proc = p
	r.log.Info("remote: started claude", "session", r.id, "pid", p.cmd.Process.Pid, "resume", r.opts.Resume)
	go r.read(p)
	return p, nil
}

// read is the one reader of Claude's stdout (ARCHITECTURE principle 4):
// everything Claude prints is handled here as it arrives, between turns
// too.
func (r *Remote) read(p *process) {
	lr := lines.NewReader(p.stdout, 64<<10, maxStreamLine)
	for n := 1; ; n++ {
		l, err := lr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.log.Warn("remote: reading Claude's output failed", "err", err)
			}
			break
		}
		if l.TooLong {
			r.log.Warn("remote: line from Claude too long; skipped", "line", n, "bytes", l.Size)
			continue
		}
		if len(l.Data) == 0 {
			continue
		}
		// Records may wait in the queue: they must not share the
		// reader's buffer.
		m, perr := claude.ParseStream(bytes.Clone(l.Data))
		if perr != nil {
			r.log.Warn("remote: unreadable line from Claude", "line", n, "err", perr)
			continue
		}
		extra, skip := r.subagentRecords(m)
		r.handleWith(p, m, extra, skip)
	}
	// What the subagents' transcripts hold that stdout did not print
	// goes out before the end of the turn.
	leftover := r.files.endAll()
	p.wait()
	r.exitedWith(p, leftover)
	close(p.done)
}

// maxStreamLine bounds one stream-json line (a tool result with a large
// file can be big; past this it is skipped, not held in memory).
const maxStreamLine = 64 << 20

// subagentRecords reads what a foreground subagent's transcript holds that
// Claude did not print, up to the message m (D22). skip is set when m is a
// subagent record already sent from the transcript. Called by the reader,
// without mu: it may wait for the transcript.
func (r *Remote) subagentRecords(m *claude.StreamMessage) (extra []*claude.Record, skip bool) {
	switch m.Type {
	case claude.StreamSystem:
		if m.System == nil {
			return nil, false
		}
		switch m.Subtype {
		case claude.SystemTaskStarted:
			if !m.System.IsBackgrounded {
				r.files.started(m.System.ToolUseID, m.System.TaskID)
			}
		case claude.SystemTaskNotification:
			return r.files.ended(r.files.toolUseID(m.System.ToolUseID, m.System.TaskID)), false
		case claude.SystemTaskUpdated:
			if claude.TaskTerminal(m.System.Patch.Status) {
				return r.files.ended(r.files.toolUseID("", m.System.TaskID)), false
			}
		}
	case claude.StreamUser, claude.StreamAssistant:
		rec := m.Record
		if rec == nil {
			return nil, false
		}
		if rec.ParentToolUseID == "" && !rec.IsSidechain {
			if fixed := r.repairs(rec); len(fixed) > 0 {
				r.mu.Lock()
				for _, x := range fixed {
					r.repaired[x.UUID] = true
				}
				r.mu.Unlock()
				return fixed, false
			}
		}
		if rec.ParentToolUseID != "" {
			prior, self := r.files.before(rec)
			if self == nil {
				return nil, true
			}
			m.Record = self
			return prior, false
		}
		if rec.Type == claude.TypeUser && rec.Message != nil {
			// The Agent call's result: its subagent is over.
			for _, b := range rec.Message.Content.Blocks {
				if b.Type == "tool_result" {
					extra = append(extra, r.files.ended(b.ToolUseID)...)
				}
			}
		}
	}
	return extra, false
}

func (r *Remote) handle(p *process, m *claude.StreamMessage) { r.handleWith(p, m, nil, false) }

// handleWith handles m after the subagent records that come before it;
// with skip, m itself was sent already.
func (r *Remote) handleWith(p *process, m *claude.StreamMessage, extra []*claude.Record, skip bool) {
	if m.IsReplay && m.Record != nil && m.Record.ParentToolUseID == "" && !m.Record.IsSidechain {
		if n := echoedPrompts(m.Record); n > 0 {
			p.promptsEchoed(n) // prompts of ours, taken (whatever waits to be sent)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.msg) > 0 && !r.sameMessage(m) {
		if waitsForUsage(m) && len(r.deferred) < MaxDeferredLines {
			// Claude runs tools (a subagent, say) while the message
			// that called them still streams: what they print waits
			// behind the message's blocks, in order.
			r.deferred = append(r.deferred, deferred{p: p, m: m, extra: extra, skip: skip})
			return
		}
		r.flushMessage()
	}
	r.dispatch(p, m, extra, skip)
}

// MaxDeferredLines bounds the lines of Claude's output that wait behind an
// assistant message being streamed for its final usage; past it the
// message goes out with the usage it has.
const MaxDeferredLines = 1000

// deferred is a line of Claude's output waiting behind the message being
// streamed.
type deferred struct {
	p     *process
	m     *claude.StreamMessage
	extra []*claude.Record
	skip  bool
}

// waitsForUsage reports whether m may wait behind the main agent's message
// being streamed: subagents' messages and system messages other than init.
// Anything else (a tool result, a permission request, the result) means
// the app must see the message now.
func waitsForUsage(m *claude.StreamMessage) bool {
	switch m.Type {
	case claude.StreamSystem:
		return m.Subtype != claude.SystemInit
	case claude.StreamUser, claude.StreamAssistant:
		return m.Record != nil && m.Record.ParentToolUseID != ""
	}
	return false
}

// dispatch handles m after the subagent records that come before it.
// Called with mu held.
func (r *Remote) dispatch(p *process, m *claude.StreamMessage, extra []*claude.Record, skip bool) {
	r.beforeMessage(m)
	defer r.afterMessage(m)
	for _, x := range extra {
		r.q.Push(item{recs: r.conv.conversation(x)})
	}
	if skip {
		return
	}
	switch m.Type {
	case claude.StreamUser, claude.StreamAssistant:
		if m.Record == nil {
			return
		}
		rec := m.Record
		mainChain := rec.ParentToolUseID == "" && !rec.IsSidechain
		if m.IsReplay && mainChain && r.queued > 0 {
			// Prompts taken: one echo can take several (echoedPrompts).
			r.queued = max(r.queued-echoedPrompts(rec), 0)
			r.publish()
		}
		if rec.UUID != "" && r.repaired[rec.UUID] {
			delete(r.repaired, rec.UUID) // sent from the transcript already
			return
		}
		if !r.turnOpen && mainChain {
			// A turn opens: a queued prompt's, or one Claude started.
			r.turnOpen = true
			r.publish()
		}
		if rec.Type == claude.TypeUser && rec.Message != nil {
			for _, b := range rec.Message.Content.Blocks {
				if b.Type == "tool_result" {
					r.q.Release(b.ToolUseID)
				}
			}
		}
		if streamed(rec) && rec.Message.ID == r.streaming {
			// Its final usage comes with message_delta (D22).
			r.msgID = rec.Message.ID
			r.msg = append(r.msg, m)
			return
		}
		r.push(m)
	case claude.StreamSystem:
		if m.System == nil {
			return
		}
		switch m.Subtype {
		case claude.SystemInit:
			// Claude starts each turn with init: a prompt's, or one it
			// starts by itself after a background task, whose first
			// message comes only when its first block is complete (the
			// notification prompt is not printed).
			r.turnOpen = true
			r.opts.Resume = true // the session exists from now on
			if m.System.Model != "" {
				r.state.Model = m.System.Model
			}
			if m.System.PermissionMode != "" {
				r.state.PermissionMode = m.System.PermissionMode
			}
			r.publish()
		default:
			r.trackTask(m.Subtype, m.System)
			r.progress(m.Subtype, m.System)
			if recs := r.conv.Convert(m); len(recs) > 0 {
				if m.Subtype == claude.SystemTaskNotification && r.stopping[m.System.ToolUseID] {
					// A task ccrelay stopped: Claude prints its
					// interruption line after this; it goes first.
					delete(r.stopping, m.System.ToolUseID)
					r.stash[m.System.ToolUseID] = recs
					return
				}
				// A background task ended: forwarded now, between turns
				// too (seed 004).
				r.q.Push(item{recs: recs})
			}
		}
	case claude.StreamRateLimit, claude.StreamConversationReset:
		if m.RateLimit != nil {
			rl := *m.RateLimit
			r.state.RateLimit = &rl
			r.publish()
		}
		if recs := r.conv.Convert(m); len(recs) > 0 {
			r.q.Push(item{recs: recs})
		}
	case claude.StreamEvent:
		r.live(m)
		if id := messageStartID(m); id != "" {
			r.streaming = id
		}
		if u := messageDeltaUsage(m); u != nil {
			r.finalUsage(u)
			r.flushMessage()
		}
	case claude.StreamControlRequest:
		r.controlRequest(p, m.Control)
	case claude.StreamControlCancel:
		// Claude withdrew a request (the tool call was cancelled): it
		// waits for no answer any more.
		var c struct {
			RequestID string `json:"request_id"`
		}
		if json.Unmarshal(m.Raw, &c) == nil {
			if i := r.pendingIndex(c.RequestID); i >= 0 {
				r.pending = append(r.pending[:i], r.pending[i+1:]...)
				r.publish()
			}
		}
	case claude.StreamControlResponse:
		if w, ok := r.waiters[m.Response.Response.RequestID]; ok {
			delete(r.waiters, m.Response.Response.RequestID)
			if w.onSuccess != nil && m.Response.Response.Subtype == "success" {
				w.onSuccess()
			}
			if w.onResponse != nil {
				w.onResponse(m.Response)
			}
			w.ch <- m.Response
		}
	case claude.StreamResult:
		r.result(m.Result)
	}
}

// push converts a user or assistant message and queues its records; a
// top-level tool call waits briefly for its permission request or result.
func (r *Remote) push(m *claude.StreamMessage) {
	recs := r.conv.Convert(m)
	if held := heldCall(m.Record); held != "" {
		r.q.PushHeld(item{recs: recs}, held, r.opts.ToolHold)
	} else {
		r.q.Push(item{recs: recs})
	}
}

// streamed reports whether rec is a top-level assistant message that Claude
// streams (stream_event lines) and whose final usage the message_delta
// event carries: Claude prints each content block with the usage of
// message_start (output_tokens 1) and no stop reason.
func streamed(rec *claude.Record) bool {
	return rec.Type == claude.TypeAssistant && rec.ParentToolUseID == "" && !rec.IsSidechain && !rec.IsAPIError &&
		rec.Message != nil && rec.Message.ID != "" && rec.Message.Model != claude.SyntheticModel
}

// sameMessage reports whether m belongs to the assistant message whose
// blocks are held for their usage: its stream events, its other blocks.
func (r *Remote) sameMessage(m *claude.StreamMessage) bool {
	if len(r.msg) == 0 {
		return true
	}
	switch m.Type {
	case claude.StreamEvent:
		return true
	case claude.StreamAssistant:
		return m.Record != nil && streamed(m.Record) && m.Record.Message.ID == r.msgID
	}
	return false
}

// flushMessage queues the held blocks of the current assistant message.
// Called with mu held.
func (r *Remote) flushMessage() {
	held, later := r.msg, r.deferred
	r.msg, r.msgID, r.deferred = nil, "", nil
	if len(held) > 0 {
		r.streaming = "" // its message_delta came, or will not
	}
	for _, m := range held {
		r.push(m)
	}
	for _, d := range later {
		r.dispatch(d.p, d.m, d.extra, d.skip)
	}
}

// finalUsage puts the usage of message_delta over the message_start usage
// of the held blocks: the message's final usage, as the transcript has it.
func (r *Remote) finalUsage(delta map[string]json.RawMessage) {
	if len(r.msg) == 0 {
		return
	}
	u := map[string]json.RawMessage{}
	if first := r.msg[0].Record.Message.Usage; len(first) > 0 {
		_ = json.Unmarshal(first, &u)
	}
	for k, v := range delta {
		if string(v) != "null" {
			u[k] = v
		}
	}
	b, err := json.Marshal(u)
	if err != nil {
		return
	}
	for _, m := range r.msg {
		m.Record.Message.Usage = b
	}
}

// messageStartID is the message id of a message_start stream event of the
// main agent, "" for any other event.
func messageStartID(m *claude.StreamMessage) string {
	if m.ParentToolUseID != "" || len(m.Event) == 0 {
		return ""
	}
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if json.Unmarshal(m.Event, &ev) != nil || ev.Type != "message_start" {
		return ""
	}
	return ev.Message.ID
}

// messageDeltaUsage is the usage of a message_delta stream event of the
// main agent, nil for any other event.
func messageDeltaUsage(m *claude.StreamMessage) map[string]json.RawMessage {
	if m.ParentToolUseID != "" || len(m.Event) == 0 {
		return nil
	}
	var ev struct {
		Type  string                     `json:"type"`
		Usage map[string]json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(m.Event, &ev) != nil || ev.Type != "message_delta" {
		return nil
	}
	if ev.Usage == nil {
		ev.Usage = map[string]json.RawMessage{}
	}
	return ev.Usage
}

// heldCall is the tool_use id of a top-level tool call in rec, which waits
// briefly in the queue (seed 002); sidechain calls are never held.
func heldCall(rec *claude.Record) string {
	if rec.Type != claude.TypeAssistant || rec.ParentToolUseID != "" || rec.Message == nil {
		return ""
	}
	for _, b := range rec.Message.Content.Blocks {
		if b.Type == "tool_use" && b.ID != "" && b.Name != "Agent" && b.Name != "Task" {
			return b.ID
		}
	}
	return ""
}

// result ends a turn: usage to the app first, then everything queued,
// interrupted results for calls left open, and turn-end (D7).
func (r *Remote) result(res *claude.Result) {
	if len(res.Usage) > 0 && string(res.Usage) != "null" {
		r.state.Usage = append(json.RawMessage(nil), res.Usage...)
	}
	// Claude reports the running total of its process: a turn's cost is
	// the difference (a new process starts again from 0).
	cost := res.TotalCostUSD - r.state.CostUSD
	if res.TotalCostUSD < r.state.CostUSD {
		cost = res.TotalCostUSD
	}
	r.state.CostUSD = res.TotalCostUSD
	status := protocol.StatusCompleted
	switch {
	case r.interrupted || strings.HasPrefix(res.TerminalReason, "aborted"):
		status = protocol.StatusCancelled
	case res.Subtype != "" && res.Subtype != "success",
		// An API error ends with subtype success but is_error and
		// terminal_reason api_error (claude-code-peer §4).
		res.IsError, res.TerminalReason == "api_error":
		status = protocol.StatusFailed
	}
	if status != protocol.StatusCompleted {
		if recs := r.conv.Interrupted(); len(recs) > 0 {
			r.q.Push(item{recs: recs})
		}
	}
	// The turn's requests end with it; a background subagent's stay.
	kept := r.pending[:0]
	for _, p := range r.pending {
		if p.Subagent != "" {
			kept = append(kept, p)
		}
	}
	r.pending = kept
	r.publish() // the usage, before the turn-end
	r.q.Push(item{close: status, time: time.Now().UnixMilli(), cost: cost})
	r.q.Flush()
	r.turnOpen, r.interrupted = false, false
	r.publish()
	r.askContext()
}

// liveDelta is the payload of a live frame: a piece of text or thinking
// being streamed. The complete text follows as a normal envelope.
type liveDelta struct {
	Type     string `json:"type"` // "delta"
	Message  string `json:"message,omitempty"`
	Index    int    `json:"index"`
	Text     string `json:"text"`
	Thinking bool   `json:"thinking,omitempty"`
	Subagent string `json:"subagent,omitempty"`
}

func (r *Remote) live(m *claude.StreamMessage) {
	if r.events == nil || len(m.Event) == 0 {
		return
	}
	var ev struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"delta"`
	}
	if json.Unmarshal(m.Event, &ev) != nil || ev.Type != "content_block_delta" {
		return
	}
	d := liveDelta{Type: "delta", Index: ev.Index}
	var api struct {
		ID string `json:"api_message_id"`
	}
	_ = json.Unmarshal(m.Raw, &api)
	d.Message = api.ID
	switch ev.Delta.Type {
	case "text_delta":
		d.Text = ev.Delta.Text
	case "thinking_delta":
		d.Text, d.Thinking = ev.Delta.Thinking, true
	default:
		return
	}
	if m.ParentToolUseID != "" {
		d.Subagent = protocol.SubagentID(m.ParentToolUseID)
	}
	b, _ := json.Marshal(d)
	r.events.Live(r.id, b)
}

func (r *Remote) controlRequest(p *process, c *claude.ControlRequest) {
	if c.Request.Subtype != claude.ControlCanUseTool {
		// Hooks, MCP and the like are not ours to answer: say so, so
		// Claude does not wait.
		b, _ := json.Marshal(map[string]any{"type": claude.StreamControlResponse, "response": map[string]any{
			"subtype": "error", "request_id": c.RequestID, "error": "ccrelay does not handle " + c.Request.Subtype}})
		_ = p.write(append(b, '\n'))
		return
	}
	q := c.Request
	pr := &PermissionRequest{ID: c.RequestID, Tool: q.ToolName, Input: q.Input, Description: q.Description,
		Call: q.ToolUseID, BlockedPath: q.BlockedPath, suggestions: q.PermissionSuggestions}
	for _, r := range suggestedRules(q.PermissionSuggestions) {
		rule := r.ToolName
		if r.RuleContent != "" {
			rule += "(" + r.RuleContent + ")"
		}
		pr.ForSession = append(pr.ForSession, rule)
	}
	if parent := r.conv.Parent(q.ToolUseID); parent != "" {
		pr.Subagent = protocol.SubagentID(parent)
	}
	// The tool call goes out before the request that refers to it.
	r.q.Release(q.ToolUseID)
	r.pending = append(r.pending, pr)
	r.publish()
}

// ErrNoRequest is returned when a permission answer names no pending
// request.
var ErrNoRequest = errors.New("no such permission request is waiting")

// Answer answers a pending permission request: allow (with the input to
// run, the request's own if nil; forSession allows the tool for the rest
// of the session) or deny with a reason the model sees.
func (r *Remote) Answer(requestID string, allow bool, input json.RawMessage, forSession bool, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.pendingIndex(requestID)
	if i < 0 || r.proc == nil {
		return ErrNoRequest
	}
	pr := r.pending[i]
	var line []byte
	if allow {
		if len(input) == 0 {
			input = pr.Input
		}
		var rules []claude.PermissionRule
		if forSession {
			rules = sessionRules(pr)
		}
		line = claude.AllowLine(requestID, input, rules)
	} else {
		line = claude.DenyLine(requestID, reason, false)
	}
	if err := r.proc.write(line); err != nil {
		return fmt.Errorf("answer Claude: %w", err)
	}
	r.pending = append(r.pending[:i], r.pending[i+1:]...)
	r.publish()
	return nil
}

func (r *Remote) pendingIndex(id string) int {
	for i, p := range r.pending {
		if p.ID == id {
			return i
		}
	}
	return -1
}

// sessionRules are the allow rules Claude suggested for the request, or
// the whole tool when it suggested none.
func sessionRules(pr *PermissionRequest) []claude.PermissionRule {
	rules := suggestedRules(pr.suggestions)
	if len(rules) == 0 {
		rules = []claude.PermissionRule{{ToolName: pr.Tool}}
	}
	return rules
}

// suggestedRules are the allow rules among Claude's permission suggestions.
func suggestedRules(suggestions json.RawMessage) []claude.PermissionRule {
	var sugg []struct {
		Type  string                  `json:"type"`
		Rules []claude.PermissionRule `json:"rules"`
	}
	_ = json.Unmarshal(suggestions, &sugg)
	var rules []claude.PermissionRule
	for _, s := range sugg {
		if s.Type == "addRules" {
			rules = append(rules, s.Rules...)
		}
	}
	return rules
}

// ErrIdle is returned by Interrupt when no turn is running.
var ErrIdle = errors.New("Claude is not working on anything")

// Interrupt stops the running turn: pending permission requests are denied,
// and Claude's interrupt request is sent; the turn ends cancelled (D7).
func (r *Remote) Interrupt(ctx context.Context) error {
	r.mu.Lock()
	p := r.proc
	if p == nil || (!r.turnOpen && r.queued == 0) {
		r.mu.Unlock()
		return ErrIdle
	}
	r.interrupted = true
	for _, pr := range r.pending {
		_ = p.write(claude.DenyLine(pr.ID, "The user interrupted the turn.", true))
	}
	r.pending = nil
	r.publish()
	r.mu.Unlock()
	_, err := r.control(ctx, p, claude.ControlInterrupt, nil)
	return err
}

// MaxTrackedTasks bounds the background subagents a Remote keeps for
// stop-task; past it, new ones cannot be stopped one by one (Interrupt
// still stops the turn).
const MaxTrackedTasks = 256

// trackTask follows which background subagents run. Called with mu held.
func (r *Remote) trackTask(subtype string, sys *claude.System) {
	switch subtype {
	case claude.SystemTaskStarted:
		if sys.IsBackgrounded && sys.TaskID != "" && sys.ToolUseID != "" && len(r.tasks) < MaxTrackedTasks {
			r.tasks[protocol.SubagentID(sys.ToolUseID)] = sys.TaskID
			r.taskCalls[protocol.SubagentID(sys.ToolUseID)] = sys.ToolUseID
		}
	case claude.SystemTaskNotification:
		delete(r.tasks, protocol.SubagentID(sys.ToolUseID))
		delete(r.taskCalls, protocol.SubagentID(sys.ToolUseID))
	case claude.SystemTaskUpdated:
		if claude.TaskTerminal(sys.Patch.Status) {
			for sub, id := range r.tasks {
				if id == sys.TaskID {
					delete(r.tasks, sub) // its call stays until its notification
				}
			}
		}
	}
}

// beforeMessage sends the held end of a stopped background task before a
// message that is not its interruption line (Claude's order, D22 aside: a
// stopped subagent's "[Request interrupted by user]" comes after its
// notification on stdout, before it in the transcript). Called with mu held.
func (r *Remote) beforeMessage(m *claude.StreamMessage) {
	if len(r.stash) == 0 {
		return
	}
	switch {
	case m.Record != nil && r.stash[m.Record.ParentToolUseID] != nil:
		return // the stopped subagent's own line: afterMessage sends its end
	case m.Record != nil, m.Type == claude.StreamResult, m.Type == claude.StreamSystem && m.Subtype == claude.SystemInit:
		r.flushStash() // the conversation goes on: the end goes first
	}
	// Anything else (live deltas, control answers, background_tasks_changed
	// and other notes) passes without sending it.
}

// afterMessage sends a stopped subagent's held end after its last line.
// Called with mu held.
func (r *Remote) afterMessage(m *claude.StreamMessage) {
	if m.Record == nil || m.Record.ParentToolUseID == "" {
		return
	}
	if recs := r.stash[m.Record.ParentToolUseID]; recs != nil {
		delete(r.stash, m.Record.ParentToolUseID)
		r.q.Push(item{recs: recs})
	}
}

// flushStash sends every held end. Called with mu held.
func (r *Remote) flushStash() {
	for id, recs := range r.stash {
		delete(r.stash, id)
		r.q.Push(item{recs: recs})
	}
}

// ErrNoTask is the answer to stop-task for a subagent that is not a
// running background task.
var ErrNoTask = errors.New("no such background subagent is running")

// StopTask stops one background subagent (Claude's stop_task control
// request), leaving the turn and the other subagents running.
func (r *Remote) StopTask(ctx context.Context, subagent string) error {
	r.mu.Lock()
	p, id := r.proc, r.tasks[subagent]
	if p != nil && id != "" && len(r.stopping) < MaxTrackedTasks {
		r.stopping[r.taskCalls[subagent]] = true
	}
	r.mu.Unlock()
	if p == nil || id == "" {
		return ErrNoTask
	}
	ctx, cancel := context.WithTimeout(ctx, ControlTimeout)
	defer cancel()
	_, err := r.control(ctx, p, claude.ControlStopTask, map[string]string{"task_id": id})
	return err
}

// SetModel changes the model: at once if Claude is running and takes it,
// otherwise from the next start. A model that is not a plain name or alias
// is refused (CheckModel).
func (r *Remote) SetModel(ctx context.Context, model string) error {
	wait, err := r.SendModel(model)
	if err != nil {
		return err
	}
	return wait(ctx)
}

// SetPermissionMode changes the permission mode the same way. Only the
// modes Claude Code knows are taken, and bypassPermissions only with
// AllowBypass (CheckPermissionMode).
func (r *Remote) SetPermissionMode(ctx context.Context, mode string) error {
	wait, err := r.SendPermissionMode(mode)
	if err != nil {
		return err
	}
	return wait(ctx)
}

// SendModel writes the model change to Claude's stdin and returns at once
// (SendPrompt); wait returns Claude's answer. The state shows the new
// model when Claude confirms it, in the order Claude answers.
func (r *Remote) SendModel(model string) (wait func(context.Context) error, err error) {
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	return r.sendSetting(claude.ControlSetModel, "model", model, func(st *SessionState) { st.Model = model })
}

// SendPermissionMode is SendModel for the permission mode.
func (r *Remote) SendPermissionMode(mode string) (wait func(context.Context) error, err error) {
	if err := CheckPermissionMode(mode, r.opts.AllowBypass); err != nil {
		return nil, err
	}
	return r.sendSetting(claude.ControlSetPermissionMode, "mode", mode, func(st *SessionState) { st.PermissionMode = mode })
}

// sendSetting sends a setting to the running Claude, or keeps it for the
// next start. apply runs under mu when Claude confirms it (from the
// reader, in Claude's order) or at once when no Claude runs.
func (r *Remote) sendSetting(subtype, field, value string, apply func(*SessionState)) (func(context.Context) error, error) {
	r.mu.Lock()
	p := r.proc
	if p == nil {
		apply(&r.state)
		r.publish()
		r.mu.Unlock()
		return func(context.Context) error { return nil }, nil
	}
	r.mu.Unlock()
	wait, err := r.sendControl(p, subtype, map[string]string{field: value}, func() {
		apply(&r.state)
		r.publish()
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := wait(ctx)
		return err
	}, nil
}

// control sends a control request and waits for Claude's answer.
func (r *Remote) control(ctx context.Context, p *process, subtype string, fields map[string]string) (*claude.ControlResponse, error) {
	wait, err := r.sendControl(p, subtype, fields, nil)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// ControlTimeout is how long Claude gets to answer a control request
// (interrupt, model, permission mode).
const ControlTimeout = 30 * time.Second

// sendControl writes a control request to Claude and returns the wait for
// its answer. onSuccess, if set, runs under mu in the reader when Claude
// answers success.
func (r *Remote) sendControl(p *process, subtype string, fields map[string]string, onSuccess func()) (func(context.Context) (*claude.ControlResponse, error), error) {
	r.mu.Lock()
	r.nextReq++
	id := "ccrelay-" + strconv.Itoa(r.nextReq)
	ch := make(chan *claude.ControlResponse, 1)
	r.waiters[id] = waiter{ch: ch, onSuccess: onSuccess}
	r.mu.Unlock()
	forget := func() {
		r.mu.Lock()
		delete(r.waiters, id)
		r.mu.Unlock()
	}
	if err := p.write(claude.ControlRequestLine(id, subtype, fields)); err != nil {
		forget()
		return nil, fmt.Errorf("send %s to Claude: %w", subtype, err)
	}
	return func(ctx context.Context) (*claude.ControlResponse, error) {
		defer forget()
		ctx, cancel := context.WithTimeout(ctx, ControlTimeout)
		defer cancel()
		select {
		case resp := <-ch:
			if resp.Response.Subtype != "success" {
				return resp, fmt.Errorf("Claude refused %s: %s", subtype, resp.Response.Error)
			}
			return resp, nil
		case <-p.exited:
			return nil, fmt.Errorf("Claude Code stopped before answering %s", subtype)
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer from Claude to %s: %w", subtype, ctx.Err())
		}
	}, nil
}

// waiter is a control request waiting for Claude's answer.
type waiter struct {
	ch        chan *claude.ControlResponse
	onSuccess func()
	// onResponse, if set, runs under mu in the reader with Claude's answer,
	// success or not.
	onResponse func(*claude.ControlResponse)
}

// exited handles the end of a Claude process. An end we did not ask for
// closes the open turn as failed with a note saying why; the next prompt
// starts a fresh process on the same session.
func (r *Remote) exited(p *process) { r.exitedWith(p, nil) }

// exitedWith is exited after sending leftover, what subagents' transcripts
// held that Claude had not printed.
func (r *Remote) exitedWith(p *process, leftover []*claude.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushMessage()
	for _, x := range leftover {
		r.q.Push(item{recs: r.conv.conversation(x)})
	}
	if r.proc != p {
		return
	}
	r.proc = nil
	r.pending = nil
	// Control requests still waiting see p.exited and give up.
	clear(r.waiters)
	if p.stopping.Load() {
		return
	}
	reason := p.reason()
	// The resumed Claude repairs what this one left (the results of calls
	// it never finished): sendRepairs reads them from here.
	r.crashAt = -1
	if fi, err := os.Stat(claude.TranscriptPath(r.opts.ProjectDir, r.id)); err == nil && r.opts.ProjectDir != "" {
		r.crashAt = fi.Size()
	}
	r.log.Warn("remote: claude stopped", "session", r.id, "reason", reason)
	r.state.Error = "Claude Code stopped: " + reason
	r.flushStash()
	if r.turnOpen {
		// Nobody interrupted: the calls ended because Claude did.
		if recs := r.conv.Closed(ExitedMidToolText(reason)); len(recs) > 0 {
			r.q.Push(item{recs: recs})
		}
		now := time.Now().UnixMilli()
		r.q.Push(item{note: "Claude Code stopped unexpectedly: " + reason, source: protocol.New(), time: now})
		r.q.Push(item{close: protocol.StatusFailed, time: now})
	}
	r.q.Flush()
	r.turnOpen, r.queued = false, 0
	r.state.Tasks, r.taskIDs = nil, map[string]string{} // they ended with Claude
	clear(r.tasks)
	clear(r.taskCalls)
	clear(r.stopping)
	r.publish()
}

// MaxRepairRecords bounds the records read from the main transcript after
// a crash (the repairs the resumed Claude writes); the rest is left to
// local mode's scanner.
const MaxRepairRecords = 1000

// repairs returns what the resumed Claude wrote to the transcript after
// the previous one ended by itself and before rec, the first message it
// prints (the results it records for calls left unfinished, "No response
// requested."), which it does not print: live then converges to replay.
// Called by the reader without mu: it may wait for the transcript
// (SubagentFileWait).
func (r *Remote) repairs(rec *claude.Record) []*claude.Record {
	r.mu.Lock()
	at := r.crashAt
	r.crashAt = -1
	r.mu.Unlock()
	if at < 0 {
		return nil
	}
	path := claude.TranscriptPath(r.opts.ProjectDir, r.id)
	deadline := time.Now().Add(SubagentFileWait)
	for {
		recs, found := readRepairs(path, at, rec.UUID)
		if found || time.Now().After(deadline) {
			return recs
		}
		time.Sleep(subagentFilePoll)
	}
}

// readRepairs reads the main-chain messages of the transcript at path from
// offset at up to the one with uuid stop (found), at most MaxRepairRecords.
func readRepairs(path string, at int64, stop string) (recs []*claude.Record, found bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return nil, false
	}
	lr := lines.NewReader(f, 64<<10, maxStreamLine)
	for len(recs) < MaxRepairRecords {
		l, err := lr.Next()
		if err != nil || !l.Complete {
			break
		}
		if l.TooLong || len(l.Data) == 0 {
			continue
		}
		rec, err := claude.Parse(bytes.Clone(l.Data))
		if err != nil || rec.UUID == "" || rec.IsSidechain || (rec.Type != claude.TypeUser && rec.Type != claude.TypeAssistant) {
			continue
		}
		if rec.UUID == stop {
			return recs, true
		}
		recs = append(recs, rec)
	}
	return recs, false
}

// ExitedMidToolText is the result of a tool call that was running when
// Claude Code ended by itself (crashed, killed): what happened, with how
// it ended (reason: "signal: killed", "exit status 1: …").
func ExitedMidToolText(reason string) string {
	return "Claude Code exited while this tool ran (" + reason + "); the tool did not finish."
}

// Stop ends the session's Claude process, if any: the open turn (if any)
// is closed with status (cancelled when the user takes the session back,
// say), after everything queued. Claude never outlives Stop.
func (r *Remote) Stop(status protocol.TurnStatus) {
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
	if r.turnOpen {
		if recs := r.conv.Interrupted(); len(recs) > 0 {
			r.q.Push(item{recs: recs})
		}
		r.q.Push(item{close: status, time: time.Now().UnixMilli()})
	}
	r.q.Close()
	r.turnOpen, r.queued, r.pending = false, 0, nil
}

// process is one running Claude.
type process struct {
	cmd    *exec.Cmd
	tree   *claudeTree
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *tailBuffer
	wmu    sync.Mutex
	// Prompts written and prompts echoed (emu): a prompt is taken once its
	// echo came; echo is closed and replaced at each echo.
	emu      sync.Mutex
	written  int
	echoed   int
	echo     chan struct{}
	exited   chan struct{} // stdout ended and the process was waited for
	done     chan struct{} // exited and handled
	stopping atomic.Bool
	waitErr  error
}

func startProcess(bin string, args []string, dir string, env []string) (*process, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrClaudeNotFound, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = claudeEnv(env) // no secret of ccrelay's reaches Claude's tools
	cmd.SysProcAttr = childAttr()
	p := &process{cmd: cmd, stderr: &tailBuffer{max: 4096}, echo: make(chan struct{}),
		exited: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if p.tree, err = startTree(cmd); err != nil {
		return nil, fmt.Errorf("start claude: %w", err)
	}
	return p, nil
}

// writePrompt writes a prompt line and returns its number (1 for the
// first prompt of this process).
func (p *process) writePrompt(line []byte) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.stdin.Write(line); err != nil {
		return 0, err
	}
	p.emu.Lock()
	defer p.emu.Unlock()
	p.written++
	return p.written, nil
}

// promptsEchoed counts n echoed prompts.
func (p *process) promptsEchoed(n int) {
	p.emu.Lock()
	defer p.emu.Unlock()
	p.echoed += n
	if p.echo != nil {
		close(p.echo)
	}
	p.echo = make(chan struct{})
}

// echoedPrompts is how many of the prompts written to Claude an echo
// takes. Each prompt is written as one text block (claude.PromptLine);
// Claude takes the prompts queued behind a running turn together, as one
// user message with a text block per prompt (Claude Code 2.1.330: "second\n",
// "third").
// A message with a tool result is no echo (0), whatever its keys say.
func echoedPrompts(rec *claude.Record) int {
	if rec.Message == nil {
		return 1
	}
	n := 0
	for _, b := range rec.Message.Content.Blocks {
		switch b.Type {
		case "text":
			n++
		case "tool_result":
			return 0
		}
	}
	return max(n, 1)
}

// echoedUpTo reports whether prompt n was echoed, and else a channel closed
// at the next echo.
func (p *process) echoedUpTo(n int) (bool, <-chan struct{}) {
	p.emu.Lock()
	defer p.emu.Unlock()
	if p.echo == nil {
		p.echo = make(chan struct{})
	}
	return p.echoed >= n, p.echo
}

func (p *process) write(line []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.stdin.Write(line)
	return err
}

// wait reaps the process after its stdout ended.
func (p *process) wait() {
	p.waitErr = p.cmd.Wait()
	p.tree.release()
	close(p.exited)
}

// reason says how the process ended, with the end of its stderr.
func (p *process) reason() string {
	select {
	case <-p.exited:
	default:
		return "still running"
	}
	msg := "exit status 0"
	if p.waitErr != nil {
		msg = p.waitErr.Error()
	}
	if tail := strings.TrimSpace(p.stderr.String()); tail != "" {
		if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		msg += ": " + tail
	}
	return msg
}

// stop closes stdin (Claude exits when its input ends), then SIGTERM, then
// SIGKILL.
func (p *process) stop(timeout time.Duration) {
	p.stopping.Store(true)
	p.wmu.Lock()
	_ = p.stdin.Close()
	p.wmu.Unlock()
	select {
	case <-p.exited:
		return
	case <-time.After(timeout):
	}
	_ = p.tree.terminate()
	select {
	case <-p.exited:
		return
	case <-time.After(timeout):
	}
	_ = p.tree.kill()
	<-p.exited
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
