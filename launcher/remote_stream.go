package launcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/lines"
	"github.com/ccrelay/ccrelay/protocol"
)

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
		if r.onLine != nil {
			r.onLine(p, m)
		}
		if id := r.movesTo(m); id != "" {
			r.moveTo(p, id)
		}
		extra, skip := r.subagentRecords(m)
		r.handleWith(p, m, extra, skip)
	}
	// What the subagents' transcripts hold that stdout did not print
	// goes out before the end of the turn.
	leftover := r.files.endAll()
	var taken []*claude.Record
	p.wait(func() { taken = r.takenAtExit(p) })
	p.stopOut.settle(r.transcript(), p.startAt)
	r.exitedWith(p, leftover, taken)
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
			if !m.System.IsBackgrounded && m.System.SubagentTask() {
				// A Bash call's task (a background subagent's prints
				// one, is_backgrounded false) has no transcript.
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
		if rec.Type == claude.TypeAssistant && rec.ParentToolUseID == "" && !rec.IsSidechain && !rec.IsAPIError &&
			rec.Message != nil && rec.Message.Model == claude.SyntheticModel {
			// The output of a slash command Claude ran itself, as a
			// message of its own: the command is in the transcript only.
			if recs := r.localCommandRecords(); len(recs) > 0 {
				return recs, false
			}
		}
		if m.IsReplay && rec.ParentToolUseID == "" && !rec.IsSidechain && commandOutput(rec) {
			// A slash command's output, echoed: the command before it
			// is in the transcript only.
			if recs := r.commandRecords(rec); len(recs) > 0 {
				return recs, false
			}
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
		if rec.ParentToolUseID != "" && rec.Type == claude.TypeAssistant && rec.AgentID != "" && !r.files.follows(rec.ParentToolUseID) &&
			rec.Message != nil && r.opts.ProjectDir != "" {
			// A background subagent's message: its final usage is in its
			// transcript once the message is complete.
			path := filepath.Join(claude.SubagentDir(r.opts.ProjectDir, r.id), "agent-"+rec.AgentID+".jsonl")
			if u := r.book.find(path, 0, rec.UUID, r.hasTranscript()); u != nil {
				rec.Message.Usage = u
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
			p.promptsEchoed(n, m.Record.UUID) // prompts of ours, taken (whatever waits to be sent)
			r.echoedAt(p)
		}
	}
	if m.Type == claude.StreamConversationReset && m.Reset != nil && m.Reset.Trigger == "clear" {
		// A /clear of ours, taken: Claude does not echo it.
		defer p.promptsEchoed(1, "")
	}
	if len(r.msg) > 0 && r.flushes(m) {
		// The held message goes out now: with the usage Claude wrote.
		r.book.find(r.transcript(), p.transcriptAt, r.msg[0].Record.UUID, r.hasTranscript())
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

// flushes reports whether m sends the assistant message held for its
// final usage (see handleWith and dispatch). Called by the reader: r.msg
// and r.deferred are its own.
func (r *Remote) flushes(m *claude.StreamMessage) bool {
	if messageDeltaUsage(m) != nil {
		return true
	}
	return !r.sameMessage(m) && !(waitsForUsage(m) && len(r.deferred) < MaxDeferredLines)
}

// transcript is the main transcript's path ("" when not known).
func (r *Remote) transcript() string {
	if r.opts.ProjectDir == "" {
		return ""
	}
	return claude.TranscriptPath(r.opts.ProjectDir, r.id)
}

// hasTranscript reports whether the main transcript exists: Claude writes
// its session, and the usage of its messages can be waited for.
func (r *Remote) hasTranscript() bool {
	path := r.transcript()
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
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
		r.conv.NoteInputs(m.Record)
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
			r.initSeen = true
			r.conv.SetClaudeVersion(m.System.Version)
			if m.System.Model != "" {
				r.state.Model = m.System.Model
			}
			if m.System.PermissionMode != "" {
				r.state.PermissionMode = m.System.PermissionMode
			}
			r.publish()
		default:
			if m.Subtype == claude.SystemStatus && m.System.PermissionMode != "" && m.System.PermissionMode != r.state.PermissionMode {
				// Claude changed its mode itself: plan mode ends when
				// the plan's approval takes effect.
				r.state.PermissionMode = m.System.PermissionMode
				r.publish()
			}
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
	case claude.StreamConversationReset:
		if m.Reset != nil && m.Reset.Trigger == "clear" && m.ParentToolUseID == "" {
			r.cleared(m)
			return
		}
		if recs := r.conv.Convert(m); len(recs) > 0 {
			r.q.Push(item{recs: recs})
		}
	case claude.StreamRateLimit:
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
		if p.atResult(m.Result.NumTurns == 0) && r.queued > 0 {
			r.queued-- // a slash command Claude ran without echoing it
		}
		r.result(m.Result)
	}
}

// push converts a user or assistant message and queues its records; a
// top-level tool call waits briefly for its permission request or result.
func (r *Remote) push(m *claude.StreamMessage) {
	recs := r.conv.Convert(m)
	if p := r.proc; p != nil && p.holdsStopOutput() {
		r.holdStopOutput(p, recs)
		return
	}
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
		if u := r.book.usage[held[0].Record.UUID]; u != nil {
			// The final usage as Claude wrote it, all its keys.
			for _, m := range held {
				m.Record.Message.Usage = u
			}
		}
	}
	for _, m := range held {
		r.push(m)
	}
	for _, d := range later {
		r.dispatch(d.p, d.m, d.extra, d.skip)
	}
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
