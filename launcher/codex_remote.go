package launcher

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/queue"
)

// Remote mode for Codex drives `codex app-server` (JSON-RPC over its
// stdio): a thread started (or resumed) at once, a turn per prompt
// (turn/start; a prompt while a turn runs is added to it, turn/steer),
// turn/interrupt for abort. Codex asks for approvals with requests of its
// own that it waits for: each is shown to the app and answered with the
// app's answer, or, when the app cannot answer it, declined at once with
// a note the app shows. No request is left unanswered: a turn waiting on
// one would never end.

// CodexFeed is where Codex remote mode puts its notes (service envelopes
// of the session).
type CodexFeed interface {
	Note(ctx context.Context, session, source, text string, nowMS int64) error
}

// CodexRemoteOptions configure a Codex remote session.
type CodexRemoteOptions struct {
	Codex string // path or name of the codex binary ("codex")
	Dir   string
	Env   []string // nil: this process's environment; CCRELAY_* is never passed
	// Thread continues that thread (thread/resume); "" starts a new one.
	Thread string
	// Model for the thread ("": Codex's configured one).
	Model string
	// Sandbox is the thread's sandbox mode (default read-only: every
	// write and every escalation is asked for).
	Sandbox string
	// StopTimeout is how long app-server gets to exit once its stdin is
	// closed, and after SIGTERM (default 5 s each).
	StopTimeout time.Duration
	Clock       queue.Clock
	Logger      *slog.Logger
}

// CodexClientName is the clientInfo name ccrelay gives app-server: the
// thread's originator in its rollout.
const CodexClientName = "ccrelay"

// MaxCodexChanges bounds the fileChange items of a turn kept for the
// approval that refers to them; MaxCodexDiff bounds one item's diffs,
// MaxCodexChangePaths the paths kept of one item (the rest are counted)
// and MaxCodexPath each path.
const (
	MaxCodexChanges     = 64
	MaxCodexDiff        = 1 << 20
	MaxCodexChangePaths = 1000
	MaxCodexPath        = 4096
)

// CodexRemote is one Codex session in remote mode.
type CodexRemote struct {
	opts   CodexRemoteOptions
	feed   CodexFeed
	events RemoteEvents
	log    *slog.Logger
	q      *queue.Queue[codexItem]

	startMu sync.Mutex // held while app-server starts
	mu      sync.Mutex
	srv     *codexServer
	thread  string
	model   string
	turn    string // the running turn's id ("" none)
	// path is the thread's rollout file, as app-server gave it.
	path string
	// finished is the id of the last turn that ended.
	finished string
	queued   int // turn/start sent and not answered
	pending  []*codexPending
	changes  map[string][]codex.FileUpdateChange // fileChange items of the turn, by item id
	order    []string                            // changes' keys, oldest first
	err      string
	closed   bool
	notes    int
	// declinedNoted and declinedMore count the requests declined in the
	// turn with a note each and past MaxDeclinedNotes.
	declinedNoted, declinedMore int
}

// codexPending is a request of Codex's shown to the app.
type codexPending struct {
	pr   PermissionRequest
	req  *codex.Request
	turn string
}

// codexItem is one entry of the outgoing queue: a note or a state.
type codexItem struct {
	thread       string
	note, source string
	time         int64
	state        *SessionState
}

// NewCodexRemote returns the remote driver of a Codex session; Start
// starts app-server and the thread.
func NewCodexRemote(opts CodexRemoteOptions, feed CodexFeed, events RemoteEvents) *CodexRemote {
	opts.Codex = cmp.Or(opts.Codex, "codex")
	opts.Sandbox = cmp.Or(opts.Sandbox, codex.SandboxReadOnly)
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &CodexRemote{opts: opts, feed: feed, events: events, log: opts.Logger, model: opts.Model,
		thread: opts.Thread, changes: map[string][]codex.FileUpdateChange{}}
	r.q = queue.New(r.deliver, opts.Clock)
	return r
}

// Thread is the session's thread id ("" before Start).
func (r *CodexRemote) Thread() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.thread
}

// RolloutPath is the thread's rollout file as app-server named it ("":
// not known). Codex creates it when the first turn starts.
func (r *CodexRemote) RolloutPath() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.path
}

// State is the session's state as the app is told it.
func (r *CodexRemote) State() SessionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot()
}

func (r *CodexRemote) snapshot() SessionState {
	st := SessionState{Mode: "remote", Status: StatusIdle, Model: r.model, Error: r.err}
	for _, p := range r.pending {
		st.Permissions = append(st.Permissions, p.pr)
	}
	st.Permissions = shownPermissions(st.Permissions)
	switch {
	case len(r.pending) > 0:
		st.Status = StatusPermission
	case r.turn != "" || r.queued > 0:
		st.Status = StatusBusy
	}
	return st
}

// publish tells the app the state, behind the notes before it. Called
// with mu held.
func (r *CodexRemote) publish() {
	st := r.snapshot()
	r.q.Push(codexItem{thread: r.thread, state: &st})
}

// noteLocked queues a service note of the session. Called with mu held.
func (r *CodexRemote) noteLocked(source, text string) {
	r.notes++
	r.q.Push(codexItem{thread: r.thread, note: text, source: source, time: time.Now().UnixMilli()})
}

// deliver hands queue items on, in order. The queue calls it from Push,
// with mu held: it does not take mu.
func (r *CodexRemote) deliver(items []codexItem) {
	ctx := context.Background()
	for _, it := range items {
		thread := it.thread
		if thread == "" {
			continue // no session yet
		}
		switch {
		case it.state != nil:
			if r.events != nil {
				r.events.State(thread, *it.state)
			}
		case it.note != "" && r.feed != nil:
			if err := r.feed.Note(ctx, thread, it.source, it.note, it.time); err != nil {
				r.log.Error("codex remote: could not store a note", "thread", thread, "err", err)
			}
		}
	}
}

// ErrCodexStopped is returned by a CodexRemote after Stop.
var ErrCodexStopped = errors.New("the Codex session is stopped")

// Start starts app-server if it does not run, and the thread: a new one,
// or the one of the options (resumed). It returns the thread id.
func (r *CodexRemote) Start(ctx context.Context) (string, error) {
	if _, err := r.ensure(ctx); err != nil {
		return "", err
	}
	return r.Thread(), nil
}

// ensure starts app-server and the thread when they do not run, and
// returns the running app-server. Starts are one at a time (startMu); mu
// is not held while app-server answers (its reader takes mu).
func (r *CodexRemote) ensure(ctx context.Context) (*codexServer, error) {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	r.mu.Lock()
	closed, running, thread, model := r.closed, r.srv, r.thread, r.model
	r.mu.Unlock()
	if closed {
		return nil, ErrCodexStopped
	}
	if running != nil && !running.ended() {
		return running, nil
	}
	srv, res, err := r.startServer(ctx, thread, model)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.err = err.Error()
		r.publish()
		return nil, err
	}
	if r.closed {
		go srv.stop(r.opts.StopTimeout)
		return nil, ErrCodexStopped
	}
	r.srv, r.thread = srv, res.Thread.ID
	if res.Thread.Path != "" {
		r.path = res.Thread.Path
	}
	if res.Model != "" && r.model == "" {
		r.model = res.Model
	}
	r.err = ""
	r.log.Info("codex remote: app-server started", "thread", r.thread, "pid", srv.cmd.Process.Pid, "resumed", thread != "")
	r.publish()
	go r.watch(srv)
	return srv, nil
}

// startServer starts app-server, initializes it and starts or resumes
// the thread.
func (r *CodexRemote) startServer(ctx context.Context, thread, model string) (*codexServer, *codex.ThreadStartResponse, error) {
	srv, err := startCodexServer(r.opts, &codexHandler{r: r})
	if err != nil {
		return nil, nil, err
	}
	fail := func(what string, err error) (*codexServer, *codex.ThreadStartResponse, error) {
		srv.stop(r.opts.StopTimeout)
		return nil, nil, fmt.Errorf("%s: %w%s", what, err, srv.stderrTail())
	}
	var init codex.InitializeResponse
	if err := srv.client.Call(ctx, codex.MethodInitialize, codex.InitializeParams{
		ClientInfo: codex.ClientInfo{Name: CodexClientName, Title: "ccrelay", Version: "1"}}, &init); err != nil {
		return fail("start codex app-server", err)
	}
	if err := srv.client.Notify(codex.MethodInitialized, nil); err != nil {
		return fail("start codex app-server", err)
	}
	var res codex.ThreadStartResponse
	if thread != "" {
		err = srv.client.Call(ctx, codex.MethodThreadResume, codex.ThreadResumeParams{ThreadID: thread, Cwd: r.opts.Dir,
			ApprovalPolicy: codex.ApprovalOnRequest, Sandbox: r.opts.Sandbox, Model: model, ExcludeTurns: true}, &res)
	} else {
		err = srv.client.Call(ctx, codex.MethodThreadStart, codex.ThreadStartParams{Cwd: r.opts.Dir,
			ApprovalPolicy: codex.ApprovalOnRequest, Sandbox: r.opts.Sandbox, Model: model}, &res)
	}
	if err != nil {
		return fail("start the Codex thread", err)
	}
	if !ValidSessionID(res.Thread.ID) || (thread != "" && res.Thread.ID != thread) {
		return fail("start the Codex thread", fmt.Errorf("app-server gave the thread id %q", clip(res.Thread.ID, 100)))
	}
	return srv, &res, nil
}

// watch waits for app-server to end: what waited on it is dropped, and
// the next prompt starts it again (the thread resumed).
func (r *CodexRemote) watch(srv *codexServer) {
	<-srv.done
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != srv {
		return
	}
	r.srv, r.turn, r.queued, r.pending = nil, "", 0, nil
	r.declinedDoneLocked() // its turn ended with it
	if !r.closed {
		r.err = "Codex app-server stopped" + srv.stderrTail()
		r.log.Warn("codex remote: app-server ended", "thread", r.thread, "err", srv.waitErr)
		r.publish()
	}
}

// Prompt sends a prompt: a new turn, or, while a turn runs, input added
// to it (turn/steer; a turn that ended meanwhile gets a new one). It
// returns once Codex took it.
func (r *CodexRemote) Prompt(ctx context.Context, text string) error {
	srv, err := r.ensure(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.srv != srv {
		r.mu.Unlock()
		return errors.New("codex app-server stopped as the prompt came; send it again")
	}
	c, thread, turn, model := srv.client, r.thread, r.turn, r.model
	r.queued++
	r.publish()
	r.mu.Unlock()
	done := func(started string) {
		r.mu.Lock()
		if r.srv == srv && r.queued > 0 {
			r.queued-- // (a restart counted it out already)
		}
		if started != "" && r.srv == srv && r.turn == "" && started != r.finished {
			// turn/started may not have been read yet; a turn whose end
			// was read already is not opened again.
			r.turn = started
		}
		r.publish()
		r.mu.Unlock()
	}
	if turn != "" {
		var res codex.TurnSteerResponse
		err := c.Call(ctx, codex.MethodTurnSteer, codex.TurnSteerParams{ThreadID: thread, ExpectedTurnID: turn, Input: codex.TextInput(text)}, &res)
		if err == nil {
			done("")
			return nil
		}
		var rpc *codex.RPCError
		if !errors.As(err, &rpc) {
			done("")
			return err
		}
		// The turn ended as the prompt came: it starts the next.
		r.log.Info("codex remote: steering refused; a new turn", "thread", thread, "err", err)
	}
	var res codex.TurnStartResponse
	err = c.Call(ctx, codex.MethodTurnStart, codex.TurnStartParams{ThreadID: thread, Input: codex.TextInput(text), Model: model}, &res)
	if err != nil {
		done("")
		return err
	}
	done(res.Turn.ID)
	return nil
}

// SetModel sets the model of the next turns (turn/start's model).
func (r *CodexRemote) SetModel(model string) error {
	if err := CheckModel(model); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.model = model
	r.publish()
	return nil
}

// Interrupt stops the running turn: the requests waiting are answered
// cancel, and turn/interrupt is sent.
func (r *CodexRemote) Interrupt(ctx context.Context) error {
	r.mu.Lock()
	if r.srv == nil || r.turn == "" {
		r.mu.Unlock()
		return ErrCodexIdle
	}
	c, thread, turn := r.srv.client, r.thread, r.turn
	for _, p := range r.pending {
		if err := codex.Decline(p.req, "The user interrupted the turn.", true); err != nil {
			r.log.Warn("codex remote: could not cancel a request", "method", p.req.Method, "err", err)
		}
	}
	r.pending = nil
	r.publish()
	r.mu.Unlock()
	return c.Call(ctx, codex.MethodTurnInterrupt, codex.TurnInterruptParams{ThreadID: thread, TurnID: turn}, nil)
}

// ErrCodexEditedInput refuses an allow that brings an input other than
// the one shown: Codex's approvals take no edited command or change, and
// would run what Codex asked for, not what the app sent.
var ErrCodexEditedInput = errors.New("Codex runs the command or change it asked for and takes no edited one: allow it as asked, or deny it and say what to do instead in a prompt")

// Answer answers a request shown to the app: allow (for the session: the
// same command, or changes to the same files, are not asked again) or
// deny. Codex's current approvals take no reason: the app is shown it in
// a note; its older ones (ReasonRead) take it, and have no note.
// An allow with an input other than the one shown is refused
// (ErrCodexEditedInput) and the request waits on, but for a question,
// whose input is the answer.
func (r *CodexRemote) Answer(requestID string, allow bool, input json.RawMessage, forSession bool, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.pending, func(p *codexPending) bool { return p.pr.ID == requestID })
	if i < 0 {
		return ErrNoRequest
	}
	p := r.pending[i]
	if allow && p.req.Method != codex.RequestUserInput && !emptyOrNull(input) && !sameJSON(input, p.pr.Input) {
		return ErrCodexEditedInput
	}
	decision := codex.DecisionDecline
	switch {
	case allow && forSession:
		decision = codex.DecisionAcceptForSession
	case allow:
		decision = codex.DecisionAccept
	}
	reason = strings.TrimSpace(reason)
	var err error
	switch p.req.Method {
	case codex.RequestLegacyExec, codex.RequestLegacyPatch:
		err = p.req.Reply(codex.LegacyDecision(decision, cmp.Or(reason, "Denied from the app.")))
	case codex.RequestUserInput:
		answers := userInputAnswers(p.req.Params, input)
		if !allow || len(answers.Answers) == 0 {
			err = codex.Decline(p.req, reason, false)
			if reason != "" {
				r.noteLocked("codex-deny:"+r.thread+":"+p.pr.ID, "Not answered from the app: "+clip(reason, 2000))
			}
			break
		}
		err = p.req.Reply(answers)
	case codex.RequestPermissions:
		if !allow {
			err = codex.Decline(p.req, reason, false)
			if reason != "" {
				r.noteLocked("codex-deny:"+r.thread+":"+p.pr.ID, "Denied from the app: "+clip(reason, 2000))
			}
			break
		}
		var asked codex.PermissionsApprovalParams
		_ = json.Unmarshal(p.req.Params, &asked)
		scope := "turn"
		if forSession {
			scope = "session"
		}
		perms := rawOrNil(asked.Permissions)
		if perms == nil {
			perms = json.RawMessage("{}")
		}
		err = p.req.Reply(map[string]any{"permissions": perms, "scope": scope})
	default:
		err = p.req.Reply(codex.DecisionResponse{Decision: decision})
		if !allow && reason != "" {
			r.noteLocked("codex-deny:"+r.thread+":"+p.pr.ID, "Denied from the app: "+clip(reason, 2000))
		}
	}
	if err != nil && !errors.Is(err, codex.ErrAnswered) {
		return fmt.Errorf("answer Codex: %w", err)
	}
	r.pending = slices.Delete(r.pending, i, i+1)
	r.publish()
	return nil
}

// userInputAnswers turns the app's answer to a question request (the
// AskUserQuestion input with "answers": question text -> the label
// chosen) into Codex's answers by question id.
func userInputAnswers(params, input json.RawMessage) codex.UserInputResponse {
	res := codex.UserInputResponse{Answers: map[string]codex.UserInputAnswer{}}
	var asked codex.UserInputParams
	var in struct {
		Answers map[string]string `json:"answers"`
	}
	if json.Unmarshal(params, &asked) != nil || json.Unmarshal(input, &in) != nil {
		return res
	}
	for _, q := range asked.Questions {
		if a, ok := in.Answers[q.Question]; ok && q.ID != "" {
			res.Answers[q.ID] = codex.UserInputAnswer{Answers: []string{a}}
		}
	}
	return res
}

// emptyOrNull reports whether an answer's input is missing or null.
func emptyOrNull(in json.RawMessage) bool {
	t := bytes.TrimSpace(in)
	return len(t) == 0 || string(t) == "null"
}

// sameJSON reports whether a and b are the same JSON value (members in
// any order).
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func rawOrNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return b
}

// Stop ends app-server: the requests waiting are answered cancel first,
// then its stdin is closed (it exits), SIGTERM and SIGKILL after
// StopTimeout each. app-server never outlives Stop.
func (r *CodexRemote) Stop() {
	r.mu.Lock()
	r.closed = true
	srv := r.srv
	for _, p := range r.pending {
		_ = codex.Decline(p.req, "The session stopped.", true)
	}
	r.pending = nil
	// The turn does not end in Codex now: what was counted of it is told.
	r.declinedDoneLocked()
	r.mu.Unlock()
	if srv != nil {
		srv.stop(r.opts.StopTimeout)
	}
	r.mu.Lock()
	r.srv, r.turn, r.queued = nil, "", 0
	r.publish()
	r.mu.Unlock()
	r.q.Close()
}

// codexServer is one running app-server.
type codexServer struct {
	cmd    *exec.Cmd
	tree   *claudeTree
	client *codex.Client
	stdin  interface{ Close() error }
	stderr *tailBuffer
	done   chan struct{} // exited and waited for
	// waitErr is Wait's error, set before done is closed.
	waitErr error
}

func startCodexServer(o CodexRemoteOptions, h codex.Handler) (*codexServer, error) {
	path, err := exec.LookPath(o.Codex)
	if err != nil {
		return nil, fmt.Errorf("codex not found: %w", err)
	}
	cmd := exec.Command(path, "app-server")
	cmd.Dir = o.Dir
	cmd.Env = claudeEnv(o.Env) // no secret of ccrelay's reaches Codex's tools
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = outputHoldTimeout
	s := &codexServer{cmd: cmd, stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if s.tree, err = startTree(cmd); err != nil {
		return nil, fmt.Errorf("start codex app-server: %w", err)
	}
	s.stdin = stdin
	s.client = codex.NewClient(stdout, stdin, h)
	go func() {
		if err := s.client.Run(); err != nil {
			o.Logger.Warn("codex remote: reading app-server ended", "err", err)
		}
		s.waitErr = cmd.Wait()
		s.tree.release()
		close(s.done)
	}()
	return s, nil
}

func (s *codexServer) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop closes app-server's stdin and waits for it to exit, with SIGTERM
// and SIGKILL after timeout each.
func (s *codexServer) stop(timeout time.Duration) {
	_ = s.stdin.Close()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.done:
		return
	case <-t.C:
	}
	_ = s.tree.terminate()
	t.Reset(timeout)
	select {
	case <-s.done:
		return
	case <-t.C:
	}
	_ = s.tree.kill()
	<-s.done
}

// stderrTail is the end of what app-server printed on stderr, for an
// error ("": nothing).
func (s *codexServer) stderrTail() string {
	if t := strings.TrimSpace(s.stderr.String()); t != "" {
		return ": " + clip(t, 1000)
	}
	return ""
}
