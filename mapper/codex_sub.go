package mapper

import (
	"strings"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// A Codex subagent (multi_agent_v1 spawn_agent) runs in a thread of its
// own, with a rollout of its own whose session_meta names its parent
// thread. MapThread maps such a thread's records into the parent's
// session: everything it does carries a subagent id derived from its
// thread id, its prompt is its first text (as a Claude subagent's is), its
// turn is the subagent's start … stop inside the parent's open turn.

// codexSub is a subagent thread mapped into the session.
type codexSub struct {
	thread string
	mapper *Codex // its own records' rules and state
	sub    *subagent
	queued bool // in threadQ: its state was used since it was compacted
}

// MaxCodexThreads bounds the subagent threads of a session whose whole
// mapping state is kept: past it, the state of the oldest thread that is
// between turns is given up for a fresh one that keeps what a later turn
// of the thread needs (its title, model, context window, time and last
// rate limit). What goes is what serves the turns that ended (the calls
// that had their end, the id sources used), which Codex's unique turn,
// item and call ids do not need again: its later turns map as before. A
// second output of a call that ended (ignored while its end is
// remembered) would come right after the first, within the thread's turn,
// not after the records of MaxCodexThreads other threads.
const MaxCodexThreads = 256

// idle reports whether the thread is between turns, with nothing held.
func (cs *codexSub) idle() bool {
	c := cs.mapper
	m := c.Mapper
	return m.turn == "" && len(m.calls) == 0 && m.nBuffered == 0 && len(m.subs) == 0 && m.unanswered == "" &&
		len(c.held) == 0 && c.turnKey == "" && c.noteModel == ""
}

// compact gives up the thread's mapping state for a fresh one with what a
// later turn needs.
func (cs *codexSub) compact() {
	old := cs.mapper
	c := NewCodex(old.Mapper.session)
	c.window, c.model = old.window, old.model
	c.Mapper.lastTime, c.Mapper.rateLimit, c.Mapper.stats = old.Mapper.lastTime, old.Mapper.rateLimit, old.Mapper.stats
	c.Mapper.lastPrompt = old.Mapper.lastPrompt
	cs.mapper, cs.queued = c, false
}

// keepThreads compacts the threads past the last maxThreads whose state
// was used (mapped since they were made or compacted), oldest first, those
// between turns; a thread in a turn is looked at again later.
func (c *Codex) keepThreads() {
	most := c.maxThreads
	if most <= 0 {
		most = MaxCodexThreads
	}
	for n := len(c.threadQ) - c.threadHead - most; n > 0; n-- {
		thread := c.threadQ[c.threadHead]
		c.threadQ[c.threadHead] = ""
		c.threadHead++
		if cs := c.threads[thread]; cs.idle() {
			cs.compact()
		} else {
			c.threadQ = append(c.threadQ, thread) // in a turn: later
		}
	}
	if c.threadHead >= most {
		k := copy(c.threadQ, c.threadQ[c.threadHead:])
		clear(c.threadQ[k:])
		c.threadQ, c.threadHead = c.threadQ[:k], 0
	}
}

// SubagentProvider is the provider id a Codex subagent thread's subagent
// id is derived from (protocol.SubagentID).
func SubagentProvider(thread string) string { return "codex-thread:" + thread }

// MapThread maps one record of the subagent thread thread (not this
// session's own) into this session. Records of all threads must come in
// one order (a replay merges the rollouts by time).
func (c *Codex) MapThread(thread string, r *codex.Record) []protocol.Envelope {
	m := c.Mapper
	m.stats.Records++
	if r.Timestamp > 0 {
		m.SetTime(r.Timestamp)
	}
	m.out, m.own = m.out[:0], m.own[:0]
	cs := c.subThread(thread)
	if r.SessionMeta != nil && cs.sub.title == "" {
		title := strings.TrimSpace(r.SessionMeta.AgentNickname)
		if title == "" {
			title = "Subagent"
		}
		cs.sub.title, _ = Preview(title, protocol.MaxDetailBytes)
	}
	envs := cs.mapper.Map(r)
	c.adopt(cs, r, envs)
	return m.result()
}

func (c *Codex) subThread(thread string) *codexSub {
	if c.threads == nil {
		c.threads = map[string]*codexSub{}
	}
	cs := c.threads[thread]
	if cs == nil {
		// Its ids derive from this session and its own turn and item
		// ids, which are its thread's own.
		cs = &codexSub{thread: thread, mapper: NewCodex(c.Mapper.session)}
		cs.sub = c.Mapper.subFor(SubagentProvider(thread))
		cs.sub.hidden = true
		// Its model is said once, not as a change from the parent's.
		c.threads[thread] = cs
	}
	if !cs.queued {
		cs.queued = true
		c.threadQ = append(c.threadQ, thread)
		c.keepThreads()
	}
	return cs
}

// adopt puts a subagent thread's envelopes into this session: its turn's
// start and end become the subagent's start and stop, its prompt an agent
// text, and everything carries the subagent and this session's turn.
func (c *Codex) adopt(cs *codexSub, r *codex.Record, envs []protocol.Envelope) {
	m := c.Mapper
	for _, e := range envs {
		switch e.Ev.T {
		case protocol.KindTurnStart:
			c.subStart(cs, r)
			continue
		case protocol.KindTurnEnd:
			if m.turn != "" {
				m.stop(cs.sub, "codex-sub-end:"+e.ID)
			}
			continue
		}
		c.subStart(cs, r)
		e.Role = protocol.RoleAgent
		e.Turn = m.turn
		e.Subagent = cs.sub.sid()
		m.out = append(m.out, e)
		m.own = append(m.own, m.depth == 0)
	}
}

// subStart opens this session's turn if none is open and starts the
// subagent if it is not running.
func (c *Codex) subStart(cs *codexSub, r *codex.Record) {
	m := c.Mapper
	if m.turn == "" {
		c.release(nil)
		if c.turnKey == "" {
			c.turnKey = "codex-sub-turn:" + cs.thread + ":" + lineKey(r)
		}
		c.ensureTurn(r)
	}
	m.ensureStarted(cs.sub, "codex-sub-start:"+cs.thread+":"+lineKey(r))
}
