package mapper

import (
	"strconv"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// A turn Claude did not finish (it crashed, was killed, or was stopped for
// a switch) is cut: every call it left open ends once, with an error
// result saying so, a note says why, and the turn ends with the status
// given (failed when Claude ended by itself). What Claude records about it
// when it resumes (a result for each call it left open, "No response
// requested.") is its bookkeeping: it cuts the turn the same way, with the
// same ids, when the live stream has not (replay, and a live stream that
// missed the end), and adds nothing when it has. The ids come from the
// turn and the calls, never from the records, so a live cut and Claude's
// later repair agree.

// Cut says how a turn Claude left unfinished ends.
type Cut struct {
	Status protocol.TurnStatus
	// Result is the result of every call still open ("the tool did not
	// finish").
	Result string
	// Note is a service message saying why ("": none).
	Note string
	// Source identifies the turn the cut opens for its note when no turn
	// is open and no prompt waits for an answer ("": nothing is cut then).
	Source string
	// OnlyOpen cuts only a turn that is open: a prompt waiting for its
	// answer keeps waiting (Claude's repair of it, or the next prompt,
	// ends it).
	OnlyOpen bool
}

// Texts of a cut that Claude's own repair makes (the reason is not known
// from the transcript).
const (
	CutNote   = "Claude Code stopped before this turn ended."
	CutResult = "Claude Code stopped before this call's result was recorded; the tool did not finish."
)

// MaxEndedCalls bounds the calls whose end the mapper remembers, so that a
// result Claude records again for one (its repair after a resume) is not
// a second end.
const MaxEndedCalls = 4096

// MaxCutCalls bounds the calls a cut ended that the mapper remembers with
// the turn of their first cut.
const MaxCutCalls = 4096

// openCall is a tool call of the session without a result yet.
type openCall struct {
	id     string
	parent string // provider id of the subagent that made it ("" top level)
	hidden bool   // a Task/Agent launch: its end is the subagent's stop
}

// Cut ends the open turn as one Claude did not finish. With no turn open,
// a prompt that no turn answered yet gets a turn of its own for the note
// (Claude took it and ended before answering), as does c.Source.
func (m *Mapper) Cut(c Cut) []protocol.Envelope {
	m.out, m.own = m.out[:0], m.own[:0]
	m.cut(c)
	return m.result()
}

func (m *Mapper) cut(c Cut) {
	if m.turn == "" && c.OnlyOpen {
		return
	}
	if m.turn == "" {
		src := m.unanswered
		if src == "" {
			src = c.Source
		}
		if src == "" {
			return
		}
		// A source given twice gets a turn of its own each time.
		key := m.derive("cut:"+src, "cut:"+src+":"+strconv.Itoa(m.stats.Turns))
		m.turn = protocol.DeriveID(m.session, "turn", key)
		m.stats.Turns++
		m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "turn-start", m.turn), nil, "",
			protocol.Event{T: protocol.KindTurnStart})
	}
	m.unanswered = ""
	calls := m.calls
	m.calls = nil
	for _, call := range calls {
		parent := m.subs[call.parent]
		if call.parent != "" && parent != nil && parent.background && !parent.done {
			m.calls = append(m.calls, call) // a background subagent's: it runs on
			continue
		}
		m.ended(call.id)
		if call.hidden {
			continue // its subagent stops with the turn
		}
		ev := protocol.Event{T: protocol.KindToolCallEnd, Call: call.id, Error: true}
		if c.Result != "" {
			res, _ := Preview(c.Result, protocol.MaxResultBytes)
			ev.Result = &res
		}
		if parent != nil {
			m.ensureStarted(parent, "cut:"+call.id)
		}
		m.emit(protocol.RoleAgent, m.cutEndID(call.id), parent, "", ev)
	}
	if c.Note != "" {
		m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "cut", m.turn, "note"), nil, "",
			protocol.Event{T: protocol.KindService, Text: c.Note})
	}
	m.closeTurn(c.Status)
}

// cutEndID is the id of the end a cut gives call in the open turn: from
// the call; a call id used again (and cut again) in a later turn takes
// the turn too. A cut of it again in the turn of its first cut (the
// records of a turn an earlier launcher's end cut read again, then
// Claude's repair) is the same end: its id again, which the relay drops.
//
// The last MaxCutCalls calls cut are remembered with the turn of their
// first cut. A call forgotten is taken as cut for the first time: its id
// from the call alone. Cut again in the turn of its first cut, that is
// the first cut's id, the same end, as when it is remembered. Only a tool
// id used again in a later turn, thousands of cut calls after its first
// cut, would repeat the first cut's id, which the relay drops (the turn's
// end still ends it in the app); Claude's tool ids are not used again.
func (m *Mapper) cutEndID(call string) string {
	id := protocol.DeriveID(m.session, "cut", call, "tool-call-end")
	first, ok := m.cutIn[call]
	if ok {
		if first != m.turn {
			id = protocol.DeriveID(m.session, "cut", m.turn, call, "tool-call-end")
		}
		return id
	}
	put(&m.cutIn, call, m.turn)
	m.cutQ = append(m.cutQ, call)
	if len(m.cutIn) > MaxCutCalls {
		// Forget the oldest call.
		delete(m.cutIn, m.cutQ[m.cutHead])
		m.cutQ[m.cutHead] = ""
		m.cutHead++
	}
	if m.cutHead >= MaxCutCalls {
		// Drop what was forgotten.
		n := copy(m.cutQ, m.cutQ[m.cutHead:])
		clear(m.cutQ[n:])
		m.cutQ, m.cutHead = m.cutQ[:n], 0
	}
	return id
}

// Unfinished reports whether the open turn waits for Claude: a call of it
// has no result, or the model has not answered the last results.
func (m *Mapper) Unfinished() bool {
	if m.turn == "" {
		return false
	}
	return m.waiting || m.openCalls(true)
}

// openCalls reports whether a call of the turn is open (topLevel: a call
// of the main agent).
func (m *Mapper) openCalls(topLevel bool) bool {
	for _, c := range m.calls {
		if !topLevel || c.parent == "" {
			if p := m.subs[c.parent]; c.parent == "" || p == nil || !p.background || p.done {
				return true
			}
		}
	}
	return false
}

// started records a call without a result. A transcript may use a tool id
// again (the mapper derives other envelope ids for it): a call started
// again with the id of one that had its end is a new call, whose result
// counts.
func (m *Mapper) started(id, parent string, hidden bool) {
	// Its entry in endedQ goes stale: ended skips it.
	delete(m.endedSet, id)
	for _, c := range m.calls {
		if c.id == id {
			return
		}
	}
	m.calls = append(m.calls, openCall{id: id, parent: parent, hidden: hidden})
	if len(m.calls) > MaxEndedCalls {
		m.calls = append(m.calls[:0], m.calls[1:]...)
	}
}

// ended records that call id had its end.
func (m *Mapper) ended(id string) {
	for i, c := range m.calls {
		if c.id == id {
			m.calls = append(m.calls[:i], m.calls[i+1:]...)
			break
		}
	}
	if _, ok := m.endedSet[id]; ok {
		return
	}
	m.endedSeq++
	put(&m.endedSet, id, m.endedSeq)
	m.endedQ = append(m.endedQ, endedCall{id, m.endedSeq})
	if len(m.endedSet) > MaxEndedCalls {
		// Forget the oldest call still remembered.
		for m.endedHead < len(m.endedQ) {
			e := m.endedQ[m.endedHead]
			m.endedQ[m.endedHead] = endedCall{}
			m.endedHead++
			if seq, ok := m.endedSet[e.id]; ok && seq == e.seq {
				delete(m.endedSet, e.id)
				break
			}
		}
	}
	if m.endedHead > MaxEndedCalls || len(m.endedQ)-m.endedHead > 2*MaxEndedCalls {
		// Drop what was forgotten and the stale entries.
		q := m.endedQ[:0]
		for _, e := range m.endedQ[m.endedHead:] {
			if seq, ok := m.endedSet[e.id]; ok && seq == e.seq {
				q = append(q, e)
			}
		}
		clear(m.endedQ[len(q):])
		m.endedQ, m.endedHead = q, 0
	}
}

// endedOnly reports whether blocks are results of calls that had their
// end, and nothing else.
func (m *Mapper) endedOnly(blocks []claude.Block) bool {
	for i := range blocks {
		if blocks[i].Type != "tool_result" {
			return false
		}
		if _, done := m.endedSet[blocks[i].ToolUseID]; !done {
			return false
		}
	}
	return len(blocks) > 0
}

// isOpen reports whether call id is open.
func (m *Mapper) isOpen(id string) bool {
	for _, c := range m.calls {
		if c.id == id {
			return true
		}
	}
	return false
}

// repair handles what Claude records when it resumes a conversation it
// left unfinished (claude-code-peer: the result of each call left open,
// "No response requested."). It reports whether r was such a record; it
// then cuts the turn, unless it is cut already.
func (m *Mapper) repair(r *claude.Record) bool {
	if r.IsSidechain || r.ParentToolUseID != "" || r.Message == nil {
		return false
	}
	if claude.IsNoResponse(r) {
		if m.turn != "" || m.unanswered != "" {
			m.cut(Cut{Status: protocol.StatusFailed, Result: CutResult, Note: CutNote})
		}
		return true
	}
	if r.Type != claude.TypeUser {
		return false
	}
	// A result for a call that had its end, or Claude's result for a call
	// its session never finished: nothing else in the record.
	cut, text := false, CutResult
	for i := range r.Message.Content.Blocks {
		b := &r.Message.Content.Blocks[i]
		if b.Type != "tool_result" || b.ToolUseID == "" {
			return false
		}
		if _, done := m.endedSet[b.ToolUseID]; done {
			continue
		}
		t := m.resultText(b)
		if !claude.IsSessionEndedResult(t) {
			return false
		}
		if !m.isOpen(b.ToolUseID) {
			if m.turn != "" {
				return false
			}
			// A call of a turn an earlier run ended, which this mapper
			// never saw (remote mode maps what Claude prints, and a resumed
			// Claude does not print the conversation): its end went out
			// then.
			continue
		}
		cut, text = true, t
	}
	if len(r.Message.Content.Blocks) == 0 {
		return false
	}
	if cut {
		m.cut(Cut{Status: protocol.StatusFailed, Result: text, Note: CutNote})
	}
	return true
}
