package mapper

import (
	"maps"
	"strconv"
	"strings"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// Codex maps the rollout records of one Codex thread to envelopes. It embeds
// the Claude mapper for the state both share (the open turn, the calls
// without a result, subagents, envelope bounds), so that what a launcher
// does with a session's turn (Open, Orphan, Cut, Note, Close) works the same
// for both agents; only the record rules differ.
//
// One source per kind (the rollout writes most things twice: a typed
// event_msg item_completed for the app-server's clients and a response_item
// for the model's history):
//
//   - prompts, agent text and reasoning summaries come from item_completed
//     (UserMessage, AgentMessage, Reasoning): the typed items hold only the
//     user's own words (the response_item user messages also carry
//     <environment_context>, AGENTS.md and the <turn_aborted> note Codex
//     writes for the model), and their ids are the ones app-server clients
//     see, so remote mode can derive the same envelope ids;
//   - tool calls start from response_item function_call / custom_tool_call
//     (item_completed comes only when a command is over) and end at their
//     function_call_output / custom_tool_call_output (the one record every
//     call gets, a declined or refused one too); the CommandExecution or
//     FileChange item Codex writes just before that output gives the exit
//     code, the command's own output and the file changes with line numbers;
//   - usage comes from token_usage_record, one per model response.
//
// A model response's envelopes are held until its token_usage_record
// (written right after its last item) so that the usage goes on the last
// of them, as Claude's usage goes on the last envelope of its message; any
// other record that produces envelopes releases them first, without usage.
type Codex struct {
	*Mapper

	turnKey   string // id source of the open turn (or the one about to open): "codex-turn:" + Codex's id
	window    int64  // the model's context window, from task_started
	model     string // the model of the last turn_context
	noteModel string // a model change to say when the turn opens

	// commands and changes are the CommandExecution and FileChange items
	// of the open turn by call id, waiting for the call's output.
	commands map[string]*codex.TurnItem
	changes  map[string]*codex.TurnItem
	// patches are the parsed apply_patch inputs of the turn's open calls.
	patches map[string]codex.Patch
	// kinds are the names of the open calls, by call id.
	kinds map[string]string

	held []protocol.Envelope

	// threads are the subagent threads mapped into this session
	// (MapThread), by thread id.
	threads map[string]*codexSub
	// threadQ[threadHead:] are the threads, oldest first, the last
	// maxThreads (MaxCodexThreads when 0) with their whole state
	// (keepThreads).
	threadQ    []string
	threadHead int
	maxThreads int
}

// NewCodex returns a mapper for the Codex thread with the given id (the
// session id).
func NewCodex(threadID string) *Codex {
	c := &Codex{Mapper: New(threadID)}
	c.resetTurn()
	return c
}

func (c *Codex) resetTurn() {
	c.commands = map[string]*codex.TurnItem{}
	c.changes = map[string]*codex.TurnItem{}
	c.patches = map[string]codex.Patch{}
	c.kinds = map[string]string{}
}

// trimCalls drops what is kept for calls the embedded mapper no longer
// has open (it keeps the last MaxEndedCalls), once a map holds twice
// that: a turn of calls that never get their output (a rollout cut short,
// or odd) holds no more than that for them.
func (c *Codex) trimCalls() {
	const most = 2 * MaxEndedCalls // dropped down to MaxEndedCalls at most
	if len(c.kinds) <= most && len(c.commands) <= most && len(c.changes) <= most && len(c.patches) <= most {
		return
	}
	open := make(map[string]bool, len(c.Mapper.calls))
	for _, oc := range c.Mapper.calls {
		open[oc.id] = true
	}
	gone := func(call string) bool { return !open[call] }
	maps.DeleteFunc(c.kinds, func(k, _ string) bool { return gone(k) })
	maps.DeleteFunc(c.patches, func(k string, _ codex.Patch) bool { return gone(k) })
	// An item comes just before its call's output, after its start: one
	// whose call is not open now has no start to go with.
	maps.DeleteFunc(c.commands, func(k string, _ *codex.TurnItem) bool { return gone(k) })
	maps.DeleteFunc(c.changes, func(k string, _ *codex.TurnItem) bool { return gone(k) })
}

// maxHeld bounds the envelopes held for a response's usage; past it they
// are released without waiting.
const maxHeld = 256

// Map maps one rollout record and returns the envelopes it produced.
// Records must come in order, each once (a rollout's ordinals say which
// were seen).
func (c *Codex) Map(r *codex.Record) []protocol.Envelope {
	m := c.Mapper
	m.stats.Records++
	if r.Timestamp > 0 {
		m.SetTime(r.Timestamp)
	}
	m.out, m.own = m.out[:0], m.own[:0]
	if c.mapRecord(r) {
		// The turn's start (and a note that opens it) go out at once; the
		// response's content waits for its usage.
		j := 0
		for j < len(m.out) && m.out[j].Ev.T != protocol.KindText && m.out[j].Ev.T != protocol.KindToolCallStart {
			j++
		}
		c.held = append(c.held, m.out[j:]...)
		m.out, m.own = m.out[:j], m.own[:j]
		if len(c.held) > maxHeld {
			c.release(nil)
		}
	}
	return m.result()
}

// Flush releases what is held for a usage record that has not come (Codex
// stopped in the middle of a response). A launcher calls it before it ends
// the session's turn itself; Close, Cut, Note and Orphan flush first.
func (c *Codex) Flush() []protocol.Envelope {
	m := c.Mapper
	m.out, m.own = m.out[:0], m.own[:0]
	c.release(nil)
	return m.result()
}

// Open is the open turn as Mapper.Open gives it, always Unfinished: Codex
// writes each turn's end (task_complete, turn_aborted), so a turn still
// open when Codex stops is one it did not finish, whatever its calls.
func (c *Codex) Open() OpenTurn {
	ot := c.Mapper.Open()
	if ot.Turn != "" {
		ot.Unfinished = true
	}
	return ot
}

// Close flushes, then ends the open turn as Mapper.Close does.
func (c *Codex) Close(status protocol.TurnStatus) []protocol.Envelope {
	return c.around(func() []protocol.Envelope { return c.Mapper.Close(status) })
}

// Cut flushes, then cuts the open turn as Mapper.Cut does.
func (c *Codex) Cut(cut Cut) []protocol.Envelope {
	return c.around(func() []protocol.Envelope { return c.Mapper.Cut(cut) })
}

// Note flushes, then emits a note as Mapper.Note does.
func (c *Codex) Note(source, text string) []protocol.Envelope {
	return c.around(func() []protocol.Envelope { return c.Mapper.Note(source, text) })
}

// Orphan flushes, then ends ot as Mapper.Orphan does.
func (c *Codex) Orphan(ot OpenTurn, cut Cut) []protocol.Envelope {
	return c.around(func() []protocol.Envelope { return c.Mapper.Orphan(ot, cut) })
}

func (c *Codex) around(f func() []protocol.Envelope) []protocol.Envelope {
	first := c.Flush()
	rest := f()
	if c.Mapper.turn == "" {
		c.turnKey = ""
		c.resetTurn()
	}
	return append(first, rest...)
}

// release puts the held envelopes before m.out, usage u on the last content
// envelope among them.
func (c *Codex) release(u *protocol.Usage) {
	if len(c.held) == 0 {
		return
	}
	m := c.Mapper
	if u != nil {
		for j := len(c.held) - 1; j >= 0; j-- {
			switch c.held[j].Ev.T {
			case protocol.KindTurnStart, protocol.KindTurnEnd, protocol.KindStart, protocol.KindStop:
				continue
			}
			c.held[j].Usage = u
			break
		}
	}
	out := append(c.held, m.out...)
	own := make([]bool, len(out))
	copy(own[len(c.held):], m.own)
	m.out, m.own = out, own
	c.held = nil
}

// mapRecord maps r into m.out and reports whether its envelopes belong to
// a model response still being written (held for its usage).
func (c *Codex) mapRecord(r *codex.Record) bool {
	switch {
	case r.TurnContext != nil:
		c.turnContext(r.TurnContext)
	case r.Usage != nil:
		c.release(c.usage(r.Usage.Usage))
	case r.Event != nil:
		return c.event(r, r.Event)
	case r.Item != nil:
		return c.responseItem(r, r.Item)
	}
	// session_meta, world_state, compacted and unknown types: nothing to
	// show (the session's folder and model are the launcher's news).
	return false
}

func (c *Codex) event(r *codex.Record, ev *codex.Event) bool {
	switch ev.Type {
	case codex.EventTaskStarted:
		c.release(nil)
		c.taskStarted(r, ev)
	case codex.EventItemCompleted:
		if ev.Item == nil {
			return false
		}
		return c.itemCompleted(r, ev)
	case codex.EventTaskComplete:
		c.release(nil)
		c.taskComplete(r, ev)
	case codex.EventTurnAborted:
		c.release(nil)
		c.turnAborted(r, ev)
	case codex.EventError, codex.EventWarning:
		if msg := strings.TrimSpace(ev.Message); msg != "" {
			c.release(nil)
			word := "Codex error: "
			if ev.Type == codex.EventWarning {
				word = "Codex warning: "
			}
			c.note(r, ev.Type, word+msg)
		}
	case codex.EventContextCompacted:
		c.release(nil)
		c.note(r, "compacted", "Conversation compacted")
	}
	// token_count (the same usage as token_usage_record, and the
	// account's rate limits), thread_settings_applied and the rest: nothing.
	return false
}

// lineKey identifies a record that has no id of its own: its ordinal, or
// its time when it has none.
func lineKey(r *codex.Record) string {
	if r.HasOrdinal {
		return "o" + strconv.FormatInt(r.Ordinal, 10)
	}
	return "t" + strconv.FormatInt(r.Timestamp, 10)
}

// taskStarted: a turn begins. Its turn-start waits for its first agent
// envelope (the prompt comes after task_started in the rollout and, as for
// Claude, belongs to no turn). A turn still open was cut short: Codex
// stopped before it wrote how it ended.
func (c *Codex) taskStarted(r *codex.Record, ev *codex.Event) {
	m := c.Mapper
	if m.turn != "" {
		m.cut(Cut{Status: protocol.StatusFailed, Result: CodexCutResult, Note: CodexCutNote})
	}
	c.resetTurn()
	c.turnKey = "codex-turn:" + ev.TurnID
	if ev.TurnID == "" {
		c.turnKey = "codex-turn-line:" + lineKey(r)
	}
	if ev.ModelContextWindow != nil && *ev.ModelContextWindow > 0 {
		c.window = *ev.ModelContextWindow
	}
}

// Texts of a turn Codex left without its end.
const (
	CodexCutNote   = "Codex stopped before this turn ended."
	CodexCutResult = "Codex stopped before this call's result was recorded; the tool did not finish."
	// CodexAbortResult ends the calls of an interrupted turn.
	CodexAbortResult = "Interrupted: the tool did not finish."
)

// ensureTurn opens the turn of the Codex turn in progress, with the note
// of a model change first.
func (c *Codex) ensureTurn(r *codex.Record) {
	m := c.Mapper
	if m.turn != "" {
		return
	}
	if c.turnKey == "" {
		// Output with no task_started before it (a rollout read from its
		// middle): a turn of its own, from the record.
		c.turnKey = "codex-turn-line:" + lineKey(r)
	}
	// A turn id seen again (a rollout line written twice, a follower that
	// read a line again) makes a turn of its own: nothing of a turn comes
	// after its end.
	c.turnKey = m.derive(c.turnKey, c.turnKey+"@"+lineKey(r))
	m.turn = protocol.DeriveID(m.session, "turn", c.turnKey)
	m.unanswered = ""
	m.stats.Turns++
	m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "turn-start", m.turn), nil, "",
		protocol.Event{T: protocol.KindTurnStart})
	if c.noteModel != "" {
		m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, c.turnKey, "model"), nil, "",
			protocol.Event{T: protocol.KindService, Text: c.noteModel})
		c.noteModel = ""
	}
}

func (c *Codex) turnContext(tc *codex.TurnContext) {
	model, _ := Preview(strings.TrimSpace(tc.Model), protocol.MaxDetailBytes)
	if model == "" {
		return
	}
	if c.model != "" && model != c.model {
		c.noteModel = "Model changed to " + model // said when the turn opens
	}
	c.model = model
}

// note emits a service envelope in the open turn (opening it if need be).
func (c *Codex) note(r *codex.Record, kind, text string) {
	c.ensureTurn(r)
	m := c.Mapper
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, c.turnKey, "note", kind, lineKey(r)), nil, "",
		protocol.Event{T: protocol.KindService, Text: text})
}

func (c *Codex) taskComplete(r *codex.Record, ev *codex.Event) {
	m := c.Mapper
	status := protocol.StatusCompleted
	if ev.Error != nil {
		status = protocol.StatusFailed
		c.note(r, "error", "Codex error: "+errorText(ev.Error.Message))
	}
	if m.turn == "" {
		// A turn with no output at all: its end is still news.
		c.ensureTurn(r)
	}
	if m.openCalls(true) {
		m.cut(Cut{Status: status, Result: CodexCutResult})
	} else {
		m.closeTurn(status)
	}
	c.turnKey = ""
	c.resetTurn()
}

func (c *Codex) turnAborted(r *codex.Record, ev *codex.Event) {
	m := c.Mapper
	text := "Interrupted by user"
	if ev.Reason != "" && ev.Reason != "interrupted" {
		reason, _ := Preview(ev.Reason, 200)
		text = "Turn aborted (" + reason + ")"
	}
	c.ensureTurn(r)
	m.cut(Cut{Status: protocol.StatusCancelled, Result: CodexAbortResult, Note: text})
	c.turnKey = ""
	c.resetTurn()
}

func (c *Codex) itemCompleted(r *codex.Record, ev *codex.Event) bool {
	m := c.Mapper
	it := ev.Item
	switch it.Type {
	case codex.TurnItemUserMessage:
		c.release(nil)
		text := it.Text()
		if strings.TrimSpace(text) == "" {
			return false
		}
		key := it.ID
		if key == "" {
			key = lineKey(r)
		}
		m.emitOwn(protocol.RoleUser, protocol.DeriveID(m.session, "codex-user", key), nil, "",
			protocol.Event{T: protocol.KindText, Text: text})
		return false
	case codex.TurnItemAgentMessage:
		text := it.Text()
		if text == "" {
			return true
		}
		c.ensureTurn(r)
		m.emitOwn(protocol.RoleAgent, c.itemID(r, it.ID, "text"), nil, "",
			protocol.Event{T: protocol.KindText, Text: text})
		return true
	case codex.TurnItemReasoning:
		text := strings.TrimSpace(strings.Join(it.SummaryText, "\n\n"))
		if text == "" {
			return true
		}
		c.ensureTurn(r)
		m.emitOwn(protocol.RoleAgent, c.itemID(r, it.ID, "thinking"), nil, "",
			protocol.Event{T: protocol.KindText, Text: text, Thinking: true})
		return true
	case codex.TurnItemCommandExecution:
		if it.ID != "" {
			c.commands[it.ID] = it
			c.trimCalls()
		}
	case codex.TurnItemFileChange:
		if it.ID != "" {
			c.changes[it.ID] = it
			c.trimCalls()
		}
	}
	return false
}

// itemID derives an envelope id from the turn and the item's own id (the
// same in remote mode, where app-server gives both), or the line.
func (c *Codex) itemID(r *codex.Record, id, kind string) string {
	if id == "" {
		id = lineKey(r)
	}
	return protocol.DeriveID(c.Mapper.session, c.turnKey, "item", id, kind)
}

func (c *Codex) responseItem(r *codex.Record, it *codex.ResponseItem) bool {
	switch it.Type {
	case codex.ItemFunctionCall, codex.ItemCustomToolCall:
		c.toolCall(r, it)
		return true
	case codex.ItemFunctionCallOutput, codex.ItemCustomToolCallOutput:
		c.release(nil)
		c.toolOutput(r, it)
	}
	// message and reasoning: item_completed has them (see Codex).
	return false
}

func errorText(msg string) string {
	msg = strings.TrimSpace(msg)
	if inner := jsonErrorMessage(msg); inner != "" {
		msg = inner
	}
	if msg == "" {
		msg = "the turn failed"
	}
	p, _ := Preview(msg, protocol.MaxDetailBytes)
	return p
}
