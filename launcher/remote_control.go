package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

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
	// Clipped says that what is shown of the request was cut to fit the
	// announcement (clipShown): the app then offers no edit of the input.
	Clipped bool `json:"clipped,omitempty"`
	// ReasonRead says that a denial's reason reaches the agent with the
	// answer, for an agent whose requests do not all take one: Codex's
	// older approvals (execCommandApproval, applyPatchApproval) take it,
	// its current ones do not (the reason is then a note in the session).
	// Claude Code reads every denial's reason: its requests leave it unset.
	ReasonRead bool `json:"reasonRead,omitempty"`

	suggestions json.RawMessage
	// asked is the input Claude sent with the request, which an allow
	// without an input of the app's gives back; Input is what the app is
	// shown (the tool call's input when Claude sent none).
	asked json.RawMessage
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
	shown := q.Input
	if emptyInput(q.Input) {
		// Claude Code 2.1.330 asks for ExitPlanMode with {}: the plan the
		// person approves is in the tool call.
		if in := r.conv.Input(q.ToolUseID); len(in) > 0 {
			shown = in
		}
	}
	pr := &PermissionRequest{ID: c.RequestID, Tool: q.ToolName, Input: shown, Description: q.Description,
		Call: q.ToolUseID, BlockedPath: q.BlockedPath, suggestions: q.PermissionSuggestions, asked: q.Input}
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
	clipShown(pr)
	// The tool call goes out before the request that refers to it.
	r.q.Release(q.ToolUseID)
	r.pending = append(r.pending, pr)
	r.publish()
}

// emptyInput reports whether a tool input is missing, null or {}.
func emptyInput(in json.RawMessage) bool {
	if len(bytes.TrimSpace(in)) == 0 {
		return true
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(in, &m) == nil && len(m) == 0
}

// ErrNoRequest is returned when a permission answer names no pending
// request.
var ErrNoRequest = errors.New("no such permission request is waiting")

// ErrClippedInput is returned when an allow brings an edited input for a
// request whose input the app was shown cut: an edit of it would run what
// was shown, not what was asked.
var ErrClippedInput = errors.New("the request's input was too long to show whole: allow it as asked or deny it")

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
		if len(input) > 0 && pr.Clipped {
			return ErrClippedInput
		}
		if len(input) == 0 {
			input = pr.asked
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

// ErrIdle is returned by Interrupt when no turn is running: in Claude's
// words; a Codex session's (ErrCodexIdle) is also ErrIdle (errors.Is).
var ErrIdle error = idleError("Claude")

// ErrCodexIdle is ErrIdle in a Codex session's words.
var ErrCodexIdle error = idleError("Codex")

// idleError is an interrupt's refusal when nothing runs, naming the
// session's agent; every one of them is ErrIdle.
type idleError string

func (e idleError) Error() string { return string(e) + " is not working on anything" }

// Is makes every idleError match ErrIdle.
func (e idleError) Is(target error) bool { return target == ErrIdle }

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
