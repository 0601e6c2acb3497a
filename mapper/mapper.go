// Package mapper turns Claude Code records into session-protocol envelopes.
//
// A Mapper holds the state of one session: the open turn, the subagents it
// knows and the sidechain records waiting for their parent. It is pure and
// deterministic: no clock, no randomness, no goroutines, no I/O. Every id it
// makes is derived from the session id and the record the envelope came from
// (DECISIONS D1), so mapping the same records again yields the same bytes.
package mapper

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// Tool names that launch a subagent. Agent is the newer name of Task; both
// follow the Task rule (D4): no tool-call envelope, subagent start … stop.
const (
	toolTask  = "Task"
	toolAgent = "Agent"
)

// DefaultMaxBuffered bounds the sidechain records held while waiting for their
// parent (D11). Past it, records are emitted without a subagent at once.
const DefaultMaxBuffered = 10000

// Stats counts what the mapper did that is worth reporting.
type Stats struct {
	Records int // records given to Map
	// OrphansFlushed counts buffered sidechain records whose parent never
	// appeared and that were emitted without a subagent (D11).
	OrphansFlushed int
	// OrphansOverflow counts records emitted at once because the buffer was
	// full.
	OrphansOverflow int
	Turns           int // turns opened
	Subagents       int // subagents started
}

// Mapper maps the records of one session. The zero value is not usable; use
// New.
type Mapper struct {
	session     string
	maxBuffered int

	turn     string // open turn id, "" when none
	lastTime int64
	// rateLimit is the last rate limit status shown ("" none yet).
	rateLimit string

	subs      map[string]*subagent // provider tool id -> subagent
	subOrder  []string             // provider ids in creation order
	uuidToSub map[string]string    // record uuid -> provider id (sidechains, D3)
	prompts   map[string][]string  // trimmed prompt -> FIFO provider ids
	agents    map[string]string    // Claude agentId -> provider id (D13)

	buffered    map[string][]*claude.Record // provider id or "agent:"+agentId -> records
	bufferOrder []string
	nBuffered   int

	usageSeen map[string]struct{} // API message ids that carried usage (D6)
	retries   int64               // API retries in the open turn (D18)
	// lastPrompt is the source of the last user prompt: a turn that an API
	// retry opens takes its id from it (D18).
	lastPrompt string
	// derived holds the last MaxDerived id sources taken from a subagent
	// or task rather than a record (D17); a source used once falls back to
	// the record, so ids stay unique even if a transcript reuses tool ids.
	// derivedQ[derivedHead:] are they, oldest first.
	derived     map[string]struct{}
	derivedQ    []string
	derivedHead int
	// cutIn maps each of the last MaxCutCalls calls a cut ended to the
	// turn of its first cut (cut.go); cutQ[cutHead:] are they, oldest
	// first.
	cutIn   map[string]string
	cutQ    []string
	cutHead int

	// calls are the tool calls without a result yet, in the order they
	// started; endedSet (endedQ, oldest first) the last MaxEndedCalls
	// calls that had their end (cut.go).
	calls []openCall
	// endedSet maps each to the number of its end; endedQ[endedHead:] are
	// the ends in order, those whose number endedSet no longer holds stale.
	endedSet  map[string]uint64
	endedQ    []endedCall
	endedHead int
	endedSeq  uint64
	// unanswered is the source of the last prompt while no turn answered
	// it; waiting is set while the open turn's last main-chain message is
	// the user's (results the model has not answered).
	unanswered string
	waiting    bool

	stats Stats
	out   []protocol.Envelope
	// own marks the envelopes of out produced by the record being mapped (not
	// by buffered records replayed inside it); usage goes only on those. A
	// replayed record's envelopes are its own while it is mapped (its usage
	// goes on them) and no longer once it is (the record it was replayed in
	// puts none of its usage on them).
	own []bool
	// depth > 0 while buffered records are replayed inside another record.
	depth int
	// texts holds the text of the tool results read while mapping the
	// record (resultText), so that each is decoded once.
	texts []resultText
}

type endedCall struct {
	id  string
	seq uint64
}

type resultText struct {
	block *claude.Block
	text  string
}

// resultText is claude.ToolResultText of b, decoded once per Map.
func (m *Mapper) resultText(b *claude.Block) string {
	for _, t := range m.texts {
		if t.block == b {
			return t.text
		}
	}
	t := claude.ToolResultText(b.Content)
	m.texts = append(m.texts, resultText{b, t})
	return t
}

type subagent struct {
	provider string
	sidMade  string // sid's, made when first used
	title    string
	hidden   bool // Task/Agent: no tool-call envelopes
	// background: launched asynchronously (D13); it outlives its turn.
	background bool
	active     bool // start emitted, stop not yet
	rooted     bool // its prompt (sidechain root) was mapped
	done       bool
}

// sid is the subagent's session id (protocol.SubagentID of its provider
// id), hashed when first used: every tool call gets a subagent, which
// most never need.
func (s *subagent) sid() string {
	if s.sidMade == "" {
		s.sidMade = protocol.SubagentID(s.provider)
	}
	return s.sidMade
}

// New returns a mapper for the session with the given id.
func New(sessionID string) *Mapper {
	m := &Mapper{session: sessionID, maxBuffered: DefaultMaxBuffered}
	m.reset()
	return m
}

// SetMaxBuffered changes the orphan buffer bound (D11); n <= 0 restores the
// default.
func (m *Mapper) SetMaxBuffered(n int) {
	if n <= 0 {
		n = DefaultMaxBuffered
	}
	m.maxBuffered = n
}

func (m *Mapper) reset() {
	m.subs = nil
	m.subOrder = nil
	m.uuidToSub = nil
	m.prompts = nil
	m.agents = nil
	m.buffered = nil
	m.bufferOrder = nil
	m.nBuffered = 0
	m.usageSeen = nil
	m.retries = 0
}

// put sets mp[k] to v, making the map at its first key: the maps of the
// mapper's state stay nil (a read of a nil map finds nothing) until used,
// so a short session or a turn that uses few of them makes few.
func put[K comparable, V any](mp *map[K]V, k K, v V) {
	if *mp == nil {
		*mp = make(map[K]V)
	}
	(*mp)[k] = v
}

// Stats returns the counters so far.
func (m *Mapper) Stats() Stats { return m.stats }

// Turn returns the id of the open turn, or "" when no turn is open.
func (m *Mapper) Turn() string { return m.turn }

// SetTime sets the time (Unix ms) used for envelopes of records that carry
// no timestamp and for turn closes (D2). The mapper also advances it from
// every record timestamp it sees.
func (m *Mapper) SetTime(ms int64) {
	if ms > m.lastTime {
		m.lastTime = ms
	}
}

// Map maps one record and returns the envelopes it produced (possibly none).
// Records must come in order; duplicates must be removed before (see
// claude.Dedupe).
func (m *Mapper) Map(r *claude.Record) []protocol.Envelope {
	m.mapOne(r)
	return m.result()
}

// MapShort is Map whose envelopes are valid only until the next call of a
// method of m: they are the mapper's own, not a copy, for a caller that
// uses each at once (replay writes it).
func (m *Mapper) MapShort(r *claude.Record) []protocol.Envelope {
	m.mapOne(r)
	if len(m.out) == 0 {
		return nil
	}
	return m.out
}

func (m *Mapper) mapOne(r *claude.Record) {
	m.stats.Records++
	if r.Timestamp > 0 {
		m.SetTime(r.Timestamp)
	}
	m.out, m.own = m.out[:0], m.own[:0]
	m.mapRecord(r, false)
	clear(m.texts)
	m.texts = m.texts[:0]
}

// Close ends the open turn with the given status: stop for every active
// subagent that does not outlive the turn, then turn-end. With no turn
// open it returns nothing and changes nothing.
func (m *Mapper) Close(status protocol.TurnStatus) []protocol.Envelope {
	m.out, m.own = m.out[:0], m.own[:0]
	m.closeTurn(status)
	return m.result()
}

// MaxDerived bounds the id sources derive remembers. A key comes again
// soon after its first use (a record read again, a notification written
// twice, a retry of the same prompt), never thousands of subagents, tasks
// and cut turns later; one that did would get its first ids again, and the
// relay would keep the first envelopes and drop the repeated ones.
const MaxDerived = 4096

// derive returns key as an id source the first time, fallback the second,
// and fallback numbered after that (a record read three times or more),
// so that no two calls give the same source among the last MaxDerived.
func (m *Mapper) derive(key, fallback string) string {
	k := key
	for n := 1; ; n++ {
		if _, used := m.derived[k]; !used {
			break
		}
		k = fallback
		if n > 1 {
			k = fallback + "#" + strconv.Itoa(n)
		}
	}
	put(&m.derived, k, struct{}{})
	m.derivedQ = append(m.derivedQ, k)
	if len(m.derived) > MaxDerived {
		// Forget the oldest source.
		delete(m.derived, m.derivedQ[m.derivedHead])
		m.derivedQ[m.derivedHead] = ""
		m.derivedHead++
	}
	if m.derivedHead >= MaxDerived {
		// Drop what was forgotten.
		n := copy(m.derivedQ, m.derivedQ[m.derivedHead:])
		clear(m.derivedQ[n:])
		m.derivedQ, m.derivedHead = m.derivedQ[:n], 0
	}
	return k
}

// Note emits a service message that no record carries (a launcher's own
// news, e.g. that Claude stopped), in the open turn or in a turn of its own
// that it opens. source identifies the note: its ids are derived from it.
func (m *Mapper) Note(source, text string) []protocol.Envelope {
	m.out, m.own = m.out[:0], m.own[:0]
	if m.turn == "" {
		m.unanswered = ""
		m.turn = protocol.DeriveID(m.session, "turn", "note:"+source)
		m.stats.Turns++
		m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "turn-start", m.turn), nil, "",
			protocol.Event{T: protocol.KindTurnStart})
	}
	m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "note", source), nil, "",
		protocol.Event{T: protocol.KindService, Text: text})
	return m.result()
}

func (m *Mapper) result() []protocol.Envelope {
	if len(m.out) == 0 {
		return nil
	}
	res := make([]protocol.Envelope, len(m.out))
	copy(res, m.out)
	return res
}

// source is the identity of a record used to derive ids.
func source(r *claude.Record) string {
	if r.UUID != "" {
		return r.UUID
	}
	return protocol.DeriveID("line", string(r.Raw))
}

func (m *Mapper) mapRecord(r *claude.Record, forceNoSub bool) {
	switch r.Type {
	case claude.TypeUser, claude.TypeAssistant, claude.TypeSystem, claude.TypeSummary:
	default:
		return // D14
	}
	if isCompactionAgent(r.AgentID) {
		return // compaction runs are Claude's housekeeping, not the user's agents
	}

	var provider string
	if !forceNoSub {
		provider = m.resolve(r)
		if provider == "" && r.IsSidechain && r.AgentID != "" && r.Type != claude.TypeSummary {
			// A subagent record we cannot link yet: wait for the launch
			// result or the task notification to name its parent (D13).
			if m.buffer("agent:"+r.AgentID, r) {
				return
			}
		}
	}
	if provider != "" && r.UUID != "" {
		put(&m.uuidToSub, r.UUID, provider)
	}
	var sub *subagent
	if provider != "" {
		sub = m.subs[provider]
		if sub == nil {
			if m.buffer(provider, r) {
				return
			}
		}
	}

	switch {
	case r.IsCompactSummary:
		return
	case r.Type == claude.TypeSystem:
		switch {
		case r.Subtype == claude.SubtypeTurnDuration:
			// Interactive Claude writes turn_duration when a turn is over
			// (D15): close it now rather than at the next prompt.
			m.closeTurn(protocol.StatusCompleted)
		case r.Retry != nil && r.Retry.Late:
			// Written after the message that followed it (Claude Code
			// before 2.1.330, D18): after the answer, the API error or the
			// interruption it says nothing true of the turn any more, and
			// with no turn open it would open one of its own.
		case r.Retry != nil:
			m.apiRetry(r, sub)
		case r.Compact != nil:
			m.compacted(r, sub)
		case r.RateLimit != nil:
			m.rateLimited(r, sub)
		case r.Reset != nil:
			m.conversationReset(r, sub)
		}
		return
	case r.Type == claude.TypeSummary:
		return
	case r.Type == claude.TypeAssistant && r.IsAPIError:
		m.apiError(r, sub)
	case r.Type == claude.TypeAssistant:
		if sub == nil && m.repair(r) {
			return
		}
		m.assistant(r, sub)
	case r.Type == claude.TypeUser:
		if sub == nil && !r.IsMeta && m.repair(r) {
			return
		}
		m.user(r, sub)
	}
}

func isCompactionAgent(agentID string) bool {
	return strings.HasPrefix(agentID, "acompact")
}

// resolve finds the provider subagent id of a record (seed 002 resolution
// order, with D3 and D13).
func (m *Mapper) resolve(r *claude.Record) string {
	if r.ParentToolUseID != "" {
		return r.ParentToolUseID
	}
	if r.AgentID != "" {
		if p, ok := m.agents[r.AgentID]; ok {
			return p
		}
	}
	if !r.IsSidechain {
		return "" // D3: inheritance applies to sidechain records only
	}
	if r.ParentUUID != "" {
		if p, ok := m.uuidToSub[r.ParentUUID]; ok {
			return p
		}
	}
	// Sidechain root by prompt.
	var p string
	if r.Type == claude.TypeUser && r.Message != nil && r.Message.Content.IsString {
		if key := strings.TrimSpace(r.Message.Content.String); key != "" {
			p = m.popPrompt(key)
		}
	}
	// Single pending Task fallback.
	if p == "" && r.ParentUUID == "" {
		only := ""
		n := 0
		for k, q := range m.prompts {
			if len(q) > 0 {
				n++
				only = k
			}
		}
		if n == 1 {
			p = m.popPrompt(only)
		}
	}
	if p != "" && r.AgentID != "" {
		m.linkAgent(r.AgentID, p)
	}
	return p
}

func (m *Mapper) popPrompt(key string) string {
	q := m.prompts[key]
	if len(q) == 0 {
		return ""
	}
	p := q[0]
	if len(q) == 1 {
		delete(m.prompts, key)
	} else {
		put(&m.prompts, key, q[1:])
	}
	return p
}

// linkAgent records that Claude's agentId belongs to the subagent launched by
// provider tool id p. Records of that agent buffered so far are replayed by
// the caller through flushAgent.
func (m *Mapper) linkAgent(agentID, p string) {
	if agentID == "" || p == "" {
		return
	}
	if _, ok := m.agents[agentID]; !ok {
		put(&m.agents, agentID, p)
	}
}

// buffer holds r until its parent is known. It returns false when the buffer
// is full; the caller then emits r without a subagent (D11).
func (m *Mapper) buffer(key string, r *claude.Record) bool {
	if m.nBuffered >= m.maxBuffered {
		m.stats.OrphansOverflow++
		return false
	}
	if _, ok := m.buffered[key]; !ok {
		m.bufferOrder = append(m.bufferOrder, key)
	}
	put(&m.buffered, key, append(m.buffered[key], r))
	m.nBuffered++
	return true
}

// replay maps the records buffered under key, in arrival order.
func (m *Mapper) replay(key string) {
	recs, ok := m.buffered[key]
	if !ok {
		return
	}
	delete(m.buffered, key)
	m.nBuffered -= len(recs)
	for i, k := range m.bufferOrder {
		if k == key {
			m.bufferOrder = append(m.bufferOrder[:i], m.bufferOrder[i+1:]...)
			break
		}
	}
	m.depth++
	for _, r := range recs {
		from := len(m.out)
		m.mapRecord(r, false)
		for j := from; j < len(m.own); j++ {
			m.own[j] = false
		}
	}
	m.depth--
}

// flushAgent replays the records of Claude agent agentID buffered before the
// agent was linked to its parent.
func (m *Mapper) flushAgent(agentID string) {
	if agentID != "" {
		m.replay("agent:" + agentID)
	}
}

func (m *Mapper) subFor(provider string) *subagent {
	s := m.subs[provider]
	if s == nil {
		s = &subagent{provider: provider}
		put(&m.subs, provider, s)
		m.subOrder = append(m.subOrder, provider)
	}
	return s
}

// emit appends an envelope. Agent envelopes carry the open turn.
func (m *Mapper) emit(role protocol.Role, id string, sub *subagent, claudeUUID string, ev protocol.Event) {
	ev.Text = capText(ev.Text)
	e := protocol.Envelope{ID: id, Time: m.lastTime, Role: role, ClaudeUUID: claudeUUID, Ev: ev}
	if role == protocol.RoleAgent {
		e.Turn = m.turn
	}
	if sub != nil {
		e.Subagent = sub.sid()
	}
	m.out = append(m.out, e)
	m.own = append(m.own, false)
}

func (m *Mapper) ensureTurn(r *claude.Record) {
	if m.turn != "" {
		return
	}
	m.turn = protocol.DeriveID(m.session, "turn", source(r))
	m.unanswered = ""
	m.stats.Turns++
	m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "turn-start", m.turn), nil, "",
		protocol.Event{T: protocol.KindTurnStart})
}

// ensureStarted emits start for s unless it is active. cause identifies
// what triggered it (the record's source), so ids stay unique and stable.
func (m *Mapper) ensureStarted(s *subagent, cause string) {
	if s == nil || s.active {
		return
	}
	s.active = true
	s.done = false
	m.stats.Subagents++
	m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "start", cause, s.sid()), s, "",
		protocol.Event{T: protocol.KindStart, Title: s.title})
}

// stop emits stop for s if it is active; cause as for ensureStarted.
func (m *Mapper) stop(s *subagent, cause string) {
	if s == nil || !s.active {
		return
	}
	s.active = false
	m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "stop", cause, s.sid()), s, "",
		protocol.Event{T: protocol.KindStop})
}

// closeTurn implements the turn close of seed 002 with D7, D11 and D13.
func (m *Mapper) closeTurn(status protocol.TurnStatus) {
	if m.turn == "" {
		return
	}
	// D11: records still waiting for a parent are emitted without a
	// subagent rather than dropped. Records of a Claude agent that was never
	// linked keep a subagent of their own, derived from the agent id.
	for len(m.bufferOrder) > 0 {
		key := m.bufferOrder[0]
		recs := m.buffered[key]
		delete(m.buffered, key)
		m.bufferOrder = m.bufferOrder[1:]
		m.nBuffered -= len(recs)
		if agentID, ok := strings.CutPrefix(key, "agent:"); ok {
			m.linkAgent(agentID, key)
			s := m.subFor(key)
			s.hidden = true
			for _, r := range recs {
				m.mapRecord(r, false)
			}
			continue
		}
		for _, r := range recs {
			m.stats.OrphansFlushed++
			m.mapRecord(r, true)
		}
	}
	for _, p := range m.subOrder {
		s := m.subs[p]
		if s.active && !(s.background && !s.done) {
			m.stop(s, "close:"+m.turn)
		}
	}
	m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "turn-end", m.turn), nil, "",
		protocol.Event{T: protocol.KindTurnEnd, Status: status})
	m.turn, m.waiting = "", false
	m.wipe()
}

// wipe clears the turn's tracking state, keeping only background subagents
// that are still running (D13).
func (m *Mapper) wipe() {
	var keep map[string]*subagent
	var order []string
	for _, p := range m.subOrder {
		if s := m.subs[p]; s.background && !s.done {
			put(&keep, p, s)
			order = append(order, p)
		}
	}
	oldUUID, oldPrompts, oldAgents := m.uuidToSub, m.prompts, m.agents
	buffered, bufOrder, nBuf := m.buffered, m.bufferOrder, m.nBuffered
	m.reset()
	// The calls of background subagents stay open with them. A Task or
	// Agent launch of the turn stopped with it (its subagent's stop), as
	// when a turn is cut: a result Claude records for it later is not an
	// end (the app saw no call start for it, and it may have seen an end
	// of an earlier call with its id).
	calls := m.calls[:0]
	var stopped []string
	for _, c := range m.calls {
		switch {
		case keep[c.parent] != nil:
			calls = append(calls, c)
		case c.hidden:
			stopped = append(stopped, c.id)
		}
	}
	clear(m.calls[len(calls):])
	m.calls = calls
	for _, id := range stopped {
		m.ended(id)
	}
	// Orphans buffered while no turn is open survive; buffers are empty here
	// after closeTurn, but keep the invariant explicit.
	m.buffered, m.bufferOrder, m.nBuffered = buffered, bufOrder, nBuf
	m.subs, m.subOrder = keep, order
	for u, p := range oldUUID {
		if keep[p] != nil {
			put(&m.uuidToSub, u, p)
		}
	}
	for k, q := range oldPrompts {
		for _, p := range q {
			if keep[p] != nil {
				put(&m.prompts, k, append(m.prompts[k], p))
			}
		}
	}
	for a, p := range oldAgents {
		if keep[p] != nil {
			put(&m.agents, a, p)
		}
	}
}

func (m *Mapper) assistant(r *claude.Record, sub *subagent) {
	src := source(r)
	m.ensureTurn(r)
	if sub == nil && !r.IsSidechain {
		m.waiting = false
	}
	m.ensureStarted(sub, src)
	start := len(m.out)
	var blocks []claude.Block
	if r.Message != nil {
		blocks = r.Message.Content.Blocks
	}
	for i := range blocks {
		b := &blocks[i]
		switch b.Type {
		case "text":
			if b.Text != nil {
				m.emitOwn(protocol.RoleAgent, blockID(m.session, src, i, "text"), sub, r.UUID,
					protocol.Event{T: protocol.KindText, Text: *b.Text})
			}
		case "thinking":
			if b.Thinking != nil {
				m.emitOwn(protocol.RoleAgent, blockID(m.session, src, i, "thinking"), sub, r.UUID,
					protocol.Event{T: protocol.KindText, Text: *b.Thinking, Thinking: true})
			}
		case "tool_use":
			m.toolUse(r, src, i, b, sub)
		}
	}
	m.attachUsage(r, start)
}

func (m *Mapper) emitOwn(role protocol.Role, id string, sub *subagent, claudeUUID string, ev protocol.Event) {
	m.emit(role, id, sub, claudeUUID, ev)
	m.own[len(m.own)-1] = true
}

func blockID(session, src string, i int, kind string) string {
	return protocol.DeriveID(session, src, strconv.Itoa(i), kind)
}

func (m *Mapper) toolUse(r *claude.Record, src string, i int, b *claude.Block, sub *subagent) {
	id := b.ID
	if id == "" {
		// No id from Claude: derive one (D1) so that replay stays stable.
		id = blockID(m.session, src, i, "call")
	}
	name := b.Name
	if name == "" {
		name = "unknown"
	}
	s := m.subFor(id)
	parent := ""
	if sub != nil {
		parent = sub.provider
	}
	m.started(id, parent, name == toolTask || name == toolAgent)
	if name == toolTask || name == toolAgent {
		s.hidden = true
		input := scanInput(b.Input)
		if p := strings.TrimSpace(input.str("prompt")); p != "" {
			q := m.prompts[p]
			dup := false
			for _, x := range q {
				dup = dup || x == id
			}
			if !dup {
				put(&m.prompts, p, append(q, id))
			}
		}
		s.title = subagentTitle(input)
		m.replay(id)
		return
	}
	title := toolTitle(name, scanInput(b.Input))
	m.emitOwn(protocol.RoleAgent, blockID(m.session, src, i, "tool-call-start"), sub, "",
		protocol.Event{T: protocol.KindToolCallStart, Call: id, Name: name, Title: title,
			Description: title, Args: toolArgs(b.Input)})
	m.replay(id)
}

// attachUsage puts the record's usage on its last content envelope (never on
// turn-start/turn-end/start/stop, never on replayed children), at most once
// per API message id (D6).
func (m *Mapper) attachUsage(r *claude.Record, start int) {
	if r.Message == nil || r.Message.Usage == nil {
		return
	}
	if id := r.Message.ID; id != "" {
		if _, ok := m.usageSeen[id]; ok {
			return
		}
	}
	var u protocol.Usage
	if u.UnmarshalJSON(r.Message.Usage) != nil {
		return // malformed usage: keep the record, drop the usage
	}
	for j := len(m.out) - 1; j >= start; j-- {
		if !m.own[j] {
			continue
		}
		switch m.out[j].Ev.T {
		case protocol.KindTurnStart, protocol.KindTurnEnd, protocol.KindStart, protocol.KindStop:
			continue
		}
		m.out[j].Usage = &u
		if id := r.Message.ID; id != "" {
			put(&m.usageSeen, id, struct{}{})
		}
		return
	}
}

func (m *Mapper) user(r *claude.Record, sub *subagent) {
	if r.IsMeta {
		return
	}
	if r.Message == nil {
		return
	}
	c := &r.Message.Content
	sidechain := r.IsSidechain || r.ParentToolUseID != ""
	src := source(r)

	if !sidechain && isTaskNotification(r) {
		m.taskNotification(r, src)
		return
	}
	if isCommandRecord(r) {
		return // D17: slash-command output, not words to the model
	}
	if !sidechain {
		if cmd := slashCommand(r); cmd != nil {
			m.command(r, src, cmd)
			return
		}
	}
	if c.IsString {
		if sidechain {
			if sub != nil && !sub.rooted && !sub.active {
				// The subagent's prompt (D4): its ids come from the
				// subagent, so the prompt read from the subagent's
				// transcript and the one remote mode synthesises from the
				// Agent call agree (D17).
				src = m.derive("root:"+sub.provider, src)
			}
			if sub != nil {
				sub.rooted = true
			}
			m.ensureTurn(r)
			m.ensureStarted(sub, src)
			m.emitOwn(protocol.RoleAgent, blockID(m.session, src, -1, "text"), sub, r.UUID,
				protocol.Event{T: protocol.KindText, Text: c.String})
			return
		}
		if isInterrupt(c.String) {
			m.interrupted(src)
			return
		}
		m.prompted(src)
		m.emitOwn(protocol.RoleUser, blockID(m.session, src, -1, "text"), nil, r.UUID,
			protocol.Event{T: protocol.KindText, Text: c.String})
		return
	}
	if len(c.Blocks) == 0 || m.endedOnly(c.Blocks) {
		return
	}
	hasResult := false
	for i := range c.Blocks {
		hasResult = hasResult || c.Blocks[i].Type == "tool_result"
	}
	if !sidechain && !hasResult {
		texts, interrupts := 0, 0
		for i := range c.Blocks {
			b := &c.Blocks[i]
			if b.Type == "text" && b.Text != nil && strings.TrimSpace(*b.Text) != "" {
				texts++
				if isInterrupt(*b.Text) {
					interrupts++
				}
			}
		}
		if texts > 0 && texts == interrupts {
			m.interrupted(src)
			return
		}
		m.prompted(src)
		for i := range c.Blocks {
			b := &c.Blocks[i]
			switch {
			case b.Type == "text" && b.Text != nil && strings.TrimSpace(*b.Text) != "":
				m.emitOwn(protocol.RoleUser, blockID(m.session, src, i, "text"), nil, r.UUID,
					protocol.Event{T: protocol.KindText, Text: *b.Text})
			case b.Type == "image":
				m.image(r, src, i, b)
			}
		}
		return
	}
	m.ensureTurn(r)
	if sidechain {
		m.ensureStarted(sub, src)
	} else if hasResult {
		m.waiting = true
	}
	for i := range c.Blocks {
		b := &c.Blocks[i]
		switch b.Type {
		case "tool_result":
			if b.ToolUseID == "" {
				continue
			}
			m.toolResult(r, src, i, b, sub, sidechain)
		case "text":
			if b.Text != nil && strings.TrimSpace(*b.Text) != "" {
				m.emitOwn(protocol.RoleAgent, blockID(m.session, src, i, "text"), sub, r.UUID,
					protocol.Event{T: protocol.KindText, Text: *b.Text})
			}
		}
	}
}

func (m *Mapper) toolResult(r *claude.Record, src string, i int, b *claude.Block, sub *subagent, sidechain bool) {
	if _, done := m.endedSet[b.ToolUseID]; done {
		return // a call ends once
	}
	m.ended(b.ToolUseID)
	// A Task or Agent launch ends with its subagent's stop, also when the
	// result is recorded inside another subagent (a nested one): the app
	// saw no call start for it.
	if s := m.subs[b.ToolUseID]; s != nil && (!sidechain || s.hidden) {
		if s.hidden {
			if agentID, async := asyncLaunch(r, b); async {
				// D13: the subagent runs on in the background; its stop
				// comes with its task notification.
				s.background = true
				if agentID != "" {
					m.linkAgent(agentID, s.provider)
					m.flushAgent(agentID)
				}
				return
			}
			if agentID := resultAgentID(r); agentID != "" {
				m.linkAgent(agentID, s.provider)
				m.flushAgent(agentID)
			}
			m.stop(s, src)
			s.done = true
			return
		}
		m.stop(s, src)
	}
	ev := protocol.Event{T: protocol.KindToolCallEnd, Call: b.ToolUseID, Error: b.IsError}
	var full []byte
	if text := m.resultText(b); text != "" {
		// ToolResultText's text is valid UTF-8: it is cut, not checked
		// again (a pass over every byte of every result).
		preview, cut := cutValid(text, protocol.MaxResultBytes)
		ev.Result, ev.Truncated = &preview, cut
		if cut {
			// The relay keeps the whole text (up to a bound) beside the
			// envelope, for "show all".
			kept, _ := cutValid(text, protocol.MaxFullResultBytes)
			full = []byte(kept)
			ev.Full = int64(len(full))
		}
	}
	if !b.IsError && onlyResult(r) {
		ev.Diff = diffOf(r)
	}
	m.emitOwn(protocol.RoleAgent, blockID(m.session, src, i, "tool-call-end"), sub, "", ev)
	m.out[len(m.out)-1].Blob = full
}

// onlyResult reports whether r holds a single tool_result block, so that
// its toolUseResult belongs to that result.
func onlyResult(r *claude.Record) bool {
	n := 0
	for i := range r.Message.Content.Blocks {
		if r.Message.Content.Blocks[i].Type == "tool_result" {
			n++
		}
	}
	return n == 1
}

// interrupted handles Claude's "[Request interrupted by user…]" marker
// (D16): it is not the user's words, it says the turn was cut.
func (m *Mapper) interrupted(src string) {
	m.unanswered = ""
	if m.turn == "" {
		return
	}
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, src, "interrupted"), nil, "",
		protocol.Event{T: protocol.KindService, Text: "Interrupted by user"})
	m.closeTurn(protocol.StatusCancelled)
}

// prompted closes the open turn for the user's prompt src: completed, or
// cut when the main agent has a call without a result (Claude ended
// during it and did not record its repair).
func (m *Mapper) prompted(src string) {
	if m.turn != "" && m.openCalls(true) {
		m.cut(Cut{Status: protocol.StatusFailed, Result: CutResult, Note: CutNote})
	} else {
		m.closeTurn(protocol.StatusCompleted)
	}
	m.lastPrompt, m.unanswered = src, src
}

func isInterrupt(s string) bool { return claude.IsInterruptText(s) }

// MaxTextBytes bounds the text of a text or service envelope as the mapper
// writes it (a prompt can be a pasted file of any size): a longer text is
// cut at a UTF-8 boundary and ends with a note that gives its full size, so
// that its envelope stays within protocol.MaxEnvelopeBytes.
const MaxTextBytes = 512 << 10

func capText(s string) string {
	if len(s) <= MaxTextBytes {
		return s
	}
	p, _ := Preview(s, MaxTextBytes)
	return p + "\n\n[ccrelay: text cut at " + strconv.Itoa(len(p)) + " of " + strconv.Itoa(len(s)) + " bytes]"
}

// Preview cuts s to at most max bytes without splitting a UTF-8 sequence.
// It reports whether s was cut. Invalid UTF-8 is replaced.
func Preview(s string, max int) (string, bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return cutValid(s, max)
}

// cutValid is Preview of s known to be valid UTF-8.
func cutValid(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}
