package mapper

import (
	"slices"

	"github.com/ccrelay/ccrelay/protocol"
)

// OpenTurn is the turn a mapper has open and its calls without a result:
// what a launcher that stops keeps, so that the one that follows it ends
// them (Orphan) before anything else of the session.
type OpenTurn struct {
	Turn  string     `json:"turn"`
	Calls []OpenCall `json:"calls,omitempty"`
	// Subagents are the Claude tool ids of the subagents started and not
	// stopped.
	Subagents []string `json:"subagents,omitempty"`
	// Unfinished: Claude was in the middle of the turn (Mapper.Unfinished:
	// a call without a result, results not answered); otherwise it had
	// answered, as far as what it printed tells, and the turn ends
	// completed, as replay ends it.
	Unfinished bool `json:"unfinished,omitempty"`
	// Time (Unix ms) is the latest record time the mapper had seen when
	// the turn took this state (0: unknown). A record of the session
	// written later was not mapped then, so it is not part of what the
	// app was sent (see Rebuilt).
	Time int64 `json:"time,omitempty"`
}

// OpenCall is a call without a result.
type OpenCall struct {
	ID     string `json:"id"`
	Parent string `json:"parent,omitempty"` // the Claude tool id of the subagent that made it
	Hidden bool   `json:"hidden,omitempty"` // a Task/Agent launch
}

// Open returns the open turn ("" when none) and its calls.
func (m *Mapper) Open() OpenTurn {
	if m.turn == "" {
		return OpenTurn{}
	}
	ot := OpenTurn{Turn: m.turn, Unfinished: m.Unfinished(), Time: m.lastTime}
	for _, c := range m.calls {
		ot.Calls = append(ot.Calls, OpenCall{ID: c.id, Parent: c.parent, Hidden: c.hidden})
	}
	for _, p := range m.subOrder {
		if m.subs[p].active {
			ot.Subagents = append(ot.Subagents, p)
		}
	}
	return ot
}

// Equal reports whether two open turns are the same turn in the same
// state (their times aside).
func (o OpenTurn) Equal(p OpenTurn) bool {
	if o.Turn != p.Turn || o.Unfinished != p.Unfinished || len(o.Calls) != len(p.Calls) || !slices.Equal(o.Subagents, p.Subagents) {
		return false
	}
	for i := range o.Calls {
		if o.Calls[i] != p.Calls[i] {
			return false
		}
	}
	return true
}

// Orphan ends ot, a turn an earlier launcher left open (it stopped, and
// its Claude with it): cut with c when it was unfinished (its calls end,
// c's note says why, it ends with c's status), else completed. What the mapper rebuilt of the session before (records of
// the transcript already sent) holds an older turn, or this one: either
// way ot is the turn the app sees open.
func (m *Mapper) Orphan(ot OpenTurn, c Cut) []protocol.Envelope {
	m.out, m.own = m.out[:0], m.own[:0]
	if ot.Turn == "" {
		return nil
	}
	if len(ot.Calls) == 0 && m.turn == "" && len(ot.Subagents) == 0 {
		// Nothing of the turn rebuilt yet (the scanner's cursor stands
		// before its first record, whose envelopes were sent): it goes on
		// with those records, sent again, as below.
		m.turn, m.unanswered = ot.Turn, ""
		return nil
	}
	if m.Rebuilt(ot) {
		// Rebuilt open from the transcript, which holds every call the app
		// saw: what Claude wrote of the turn and was not sent yet continues
		// it, and what ends it in replay (the next prompt, the resumed
		// Claude's repair, Claude's exit) ends it here too.
		return nil
	}
	if m.turn != ot.Turn && m.turn != "" {
		// Closed already in the app's copy (the end a transcript does not
		// record, a turn that followed it).
		m.turn = ""
		m.wipe()
	}
	m.turn = ot.Turn
	for _, p := range ot.Subagents {
		s := m.subFor(p)
		s.hidden, s.active = true, true
	}
	for _, call := range ot.Calls {
		if _, done := m.endedSet[call.ID]; done || m.isOpen(call.ID) {
			continue
		}
		m.calls = append(m.calls, openCall{id: call.ID, parent: call.Parent, hidden: call.Hidden})
		if call.Hidden {
			m.subFor(call.ID).hidden = true
		}
	}
	if ot.Unfinished {
		m.cut(c)
	} else {
		m.unanswered = ""
		m.closeTurn(protocol.StatusCompleted)
	}
	return m.result()
}

// Rebuilt reports whether the mapper has ot open with every call of it
// (open, or ended since): what it maps next continues the turn the app
// sees open, and Orphan adds nothing.
//
// Records the app was sent can come again after a restart, not as
// replayed: the open turn is kept after every append that changes it,
// while the scanner's cursor can stand before records whose envelopes
// were appended (remote mode appends what Claude prints while the
// scanner's copy is held; a scanner saves its cursor after the append).
// Mapped again, they rebuild ot; their envelopes have the ids that were
// sent. Orphan is due only once the mapper rebuilt ot, or before a record
// written after ot.Time, which the app was not sent: ending ot before the
// records that rebuild it cut calls whose results the transcript holds.
func (m *Mapper) Rebuilt(ot OpenTurn) bool {
	return ot.Turn != "" && m.turn == ot.Turn && !m.lacksCalls(ot)
}

// lacksCalls reports whether ot has a call the mapper does not know: one the
// app saw start that the transcript does not hold.
func (m *Mapper) lacksCalls(ot OpenTurn) bool {
	for _, c := range ot.Calls {
		if _, done := m.endedSet[c.ID]; !done && !m.isOpen(c.ID) {
			return true
		}
	}
	return false
}
