package launcher

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/claude"
)

// Converter turns Claude's stream-json messages into the records the mapper
// reads from transcripts. User and assistant messages keep Claude's own
// uuid (the transcript has the same one, DECISIONS D1); what stream-json
// leaves out is rebuilt: a background subagent's prompt (D4, the sidechain
// root), the task notification that starts a background follow-up turn
// (D13), and interrupted results for tool calls a cut turn left open (D7).
type Converter struct {
	session string
	agents  map[string]*agentCall // Agent/Task tool_use id -> launch (the last MaxConverterAgents)
	agentQ  []string              // agents' ids, oldest first
	open    map[string]string     // tool_use id -> parent tool_use id ("" top level), no result yet (the last MaxConverterCalls)
	order   []string              // open calls in start order (and some closed, compacted as it grows)
	parents map[string]string     // tool_use id -> parent tool_use id, for the last MaxConverterCalls calls seen
	parentQ []string              // parents' ids, oldest first
	// retries wait for the next conversation message: Claude prints a
	// retry before it echoes the prompt the retried call answers (D18).
	retries []*claude.Record
	// inputs are the inputs of the last tool calls Claude printed
	// (MaxRememberedInputs), for permission requests that come without
	// one; inputQ holds their ids, oldest first.
	inputs map[string]json.RawMessage
	inputQ []string
	// lateRetries: the Claude running writes its retries to the transcript
	// late (claude.RetriesWrittenLate); the ones it prints are marked so,
	// as replay marks those it reads.
	lateRetries bool
}

// MaxRememberedInputs bounds the tool call inputs the converter keeps for
// permission requests that come without one; an input larger than
// maxRememberedInput is not kept.
const (
	MaxRememberedInputs = 16
	maxRememberedInput  = 1 << 20
)

// NoteInputs remembers the inputs of the tool calls in r, an assistant
// message as Claude printed it: Claude Code 2.1.330 asks to run
// ExitPlanMode with an empty input, the plan being in the call only.
func (c *Converter) NoteInputs(r *claude.Record) {
	if r == nil || r.Type != claude.TypeAssistant || r.Message == nil {
		return
	}
	for _, b := range r.Message.Content.Blocks {
		if b.Type != "tool_use" || b.ID == "" || len(b.Input) > maxRememberedInput {
			continue
		}
		if c.inputs == nil {
			c.inputs = map[string]json.RawMessage{}
		}
		if _, ok := c.inputs[b.ID]; !ok {
			c.inputQ = append(c.inputQ, b.ID)
			if len(c.inputQ) > MaxRememberedInputs {
				delete(c.inputs, c.inputQ[0])
				c.inputQ = append(c.inputQ[:0], c.inputQ[1:]...)
			}
		}
		c.inputs[b.ID] = b.Input
	}
}

// Input is the input of tool call id as Claude printed it (nil when not
// remembered).
func (c *Converter) Input(id string) json.RawMessage { return c.inputs[id] }

// SetClaudeVersion tells the converter which Claude Code prints what it
// converts (init's claude_code_version).
func (c *Converter) SetClaudeVersion(version string) {
	c.lateRetries = claude.RetriesWrittenLate(version)
}

// A converter lives as long as its Claude process: what it remembers per
// call is bounded, the oldest forgotten first.
const (
	// MaxConverterCalls bounds the tool calls whose parent the converter
	// remembers, and the calls it holds open (a call that has had no result
	// among the last MaxConverterCalls is not given an interrupted result
	// when the turn is cut).
	MaxConverterCalls = 4096
	// MaxConverterAgents bounds the subagent launches it remembers (a
	// background subagent older than the last MaxConverterAgents launches
	// ends without its task notification record).
	MaxConverterAgents = 1024
)

type agentCall struct {
	prompt     string
	background bool
	rooted     bool
}

// NewConverter returns a converter for the session with the given id.
func NewConverter(session string) *Converter {
	return &Converter{session: session, agents: map[string]*agentCall{}, open: map[string]string{}, parents: map[string]string{}}
}

// Parent returns the tool_use id of the subagent that made tool call id
// ("" for a top-level call or one never seen).
func (c *Converter) Parent(toolUseID string) string { return c.parents[toolUseID] }

// Convert returns the records for one stream-json message (none for most
// non-conversation messages).
func (c *Converter) Convert(m *claude.StreamMessage) []*claude.Record {
	switch m.Type {
	case claude.StreamUser, claude.StreamAssistant:
		return c.conversation(m.Record)
	case claude.StreamRateLimit, claude.StreamConversationReset:
		// Printed on stdout only (no transcript record): a system record
		// of ccrelay's, which the mapper shows as a service envelope.
		if m.UUID == "" {
			return nil
		}
		return []*claude.Record{{Type: claude.TypeSystem, Subtype: m.Type, UUID: m.UUID, SessionID: c.session,
			Timestamp: time.Now().UnixMilli(), RateLimit: m.RateLimit, Reset: m.Reset}}
	case claude.StreamSystem:
		if m.System == nil {
			return nil
		}
		switch m.Subtype {
		case claude.SystemTaskStarted:
			a := c.agent(m.System.ToolUseID)
			if a.prompt == "" {
				a.prompt = m.System.Prompt
			}
			a.background = m.System.IsBackgrounded
			if a.background && !a.rooted && a.prompt != "" {
				// stream-json never prints a background subagent's
				// prompt; it belongs here, where the subagent starts.
				a.rooted = true
				return []*claude.Record{c.root(m.System.ToolUseID, m.System.TaskID, 0)}
			}
		case claude.SubtypeAPIRetry, claude.SubtypeCompactBoundary:
			// A retry of a failed API call and a compaction boundary are
			// system records in the transcript too (D18, D19).
			r, err := claude.Parse(m.Raw)
			if err != nil {
				return nil
			}
			if r.SessionID == "" {
				r.SessionID = c.session
			}
			if m.Subtype == claude.SubtypeAPIRetry {
				if r.Retry != nil {
					r.Retry.Late = c.lateRetries
				}
				c.retries = append(c.retries, r)
				return nil
			}
			return []*claude.Record{r}
		case claude.SystemTaskNotification:
			a := c.agents[m.System.ToolUseID]
			if a == nil || !a.background {
				// A foreground subagent ends with its tool result.
				return nil
			}
			return []*claude.Record{c.notification(m.System)}
		}
	}
	return nil
}

func (c *Converter) agent(toolUseID string) *agentCall {
	a := c.agents[toolUseID]
	if a == nil {
		a = &agentCall{}
		c.agents[toolUseID] = a
		c.agentQ = append(c.agentQ, toolUseID)
		if len(c.agentQ) > MaxConverterAgents {
			delete(c.agents, c.agentQ[0])
			c.agentQ = append(c.agentQ[:0], c.agentQ[1:]...)
		}
	}
	return a
}

// call remembers a tool call's parent and holds it open until its result.
func (c *Converter) call(id, parent string) {
	if _, ok := c.parents[id]; !ok {
		c.parentQ = append(c.parentQ, id)
		if len(c.parentQ) > MaxConverterCalls {
			delete(c.parents, c.parentQ[0])
			c.parentQ = append(c.parentQ[:0], c.parentQ[1:]...)
		}
	}
	c.parents[id] = parent
	if _, ok := c.open[id]; ok {
		return
	}
	c.open[id] = parent
	c.order = append(c.order, id)
	if len(c.open) > MaxConverterCalls {
		c.compactOrder()
		delete(c.open, c.order[0])
		c.order = append(c.order[:0], c.order[1:]...)
	}
	if len(c.order) > 2*len(c.open)+64 {
		c.compactOrder()
	}
}

// compactOrder drops closed calls from order.
func (c *Converter) compactOrder() {
	keep := c.order[:0]
	for _, id := range c.order {
		if _, ok := c.open[id]; ok {
			keep = append(keep, id)
		}
	}
	clear(c.order[len(keep):])
	c.order = keep
}

func (c *Converter) conversation(r *claude.Record) []*claude.Record {
	if r == nil {
		return nil
	}
	if r.SessionID == "" {
		r.SessionID = c.session
	}
	var out []*claude.Record
	if p := r.ParentToolUseID; p != "" {
		r.IsSidechain = true
		a := c.agent(p)
		if !a.rooted {
			a.rooted = true
			if isSubagentPrompt(r) {
				// Claude prints a foreground subagent's prompt as text
				// blocks; the transcript (and so replay) has it as a
				// string, the sidechain root: one prompt, replay's id.
				asRootPrompt(r)
			} else if a.prompt != "" {
				out = append(out, c.root(p, r.AgentID, r.Timestamp))
			}
		}
	}
	if r.Message != nil {
		for i := range r.Message.Content.Blocks {
			b := &r.Message.Content.Blocks[i]
			switch {
			case r.Type == claude.TypeAssistant && b.Type == "tool_use" && b.ID != "":
				c.call(b.ID, r.ParentToolUseID)
				if b.Name == "Agent" || b.Name == "Task" {
					var in struct {
						Prompt string `json:"prompt"`
					}
					_ = json.Unmarshal(b.Input, &in)
					if a := c.agent(b.ID); a.prompt == "" {
						a.prompt = strings.TrimSpace(in.Prompt)
					}
				}
			case r.Type == claude.TypeUser && b.Type == "tool_result":
				delete(c.open, b.ToolUseID)
			}
		}
		if r.Type == claude.TypeUser && r.ParentToolUseID == "" && isInterruptMarker(r) {
			// Claude cut the turn: close what it left open first (D7).
			out = append(out, c.Interrupted()...)
		}
	}
	if len(c.retries) > 0 {
		retries := c.retries
		c.retries = nil
		if isPrompt(r) {
			// The transcript has the prompt first, then the retries.
			return append(append(out, r), retries...)
		}
		out = append(out, retries...)
	}
	return append(out, r)
}

// isSubagentPrompt reports whether r is a user message of text only (no
// tool result): a subagent's prompt when it is the subagent's first.
func isSubagentPrompt(r *claude.Record) bool {
	if r.Type != claude.TypeUser || r.Message == nil {
		return false
	}
	c := &r.Message.Content
	if c.IsString {
		return true
	}
	for _, b := range c.Blocks {
		if b.Type != "text" {
			return false
		}
	}
	return len(c.Blocks) > 0
}

// asRootPrompt makes the content of a subagent's prompt a string, as the
// subagent's transcript holds it.
func asRootPrompt(r *claude.Record) {
	c := &r.Message.Content
	if c.IsString {
		return
	}
	var sb strings.Builder
	for _, b := range c.Blocks {
		if b.Text != nil {
			sb.WriteString(*b.Text)
		}
	}
	r.Message.Content = claude.Content{Present: true, IsString: true, String: sb.String(), Raw: c.Raw}
}

// isPrompt reports whether r is a top-level user message that is neither a
// tool result nor Claude's interrupt marker.
func isPrompt(r *claude.Record) bool {
	if r.Type != claude.TypeUser || r.ParentToolUseID != "" || r.Message == nil || isInterruptMarker(r) {
		return false
	}
	for _, b := range r.Message.Content.Blocks {
		if b.Type == "tool_result" {
			return false
		}
	}
	return true
}

func isInterruptMarker(r *claude.Record) bool {
	c := &r.Message.Content
	text := c.String
	if !c.IsString {
		for _, b := range c.Blocks {
			if b.Type == "text" && b.Text != nil {
				text += *b.Text
			}
		}
	}
	return claude.IsInterruptText(text)
}

// root is the sidechain root prompt of subagent p, which stream-json does
// not print for background subagents.
func (c *Converter) root(p, agentID string, ts int64) *claude.Record {
	return mustRecord(map[string]any{
		"type": "user", "isSidechain": true, "parent_tool_use_id": p, "agent_id": agentID,
		"sessionId": c.session, "timestamp": ts,
		"message": map[string]any{"role": "user", "content": c.agents[p].prompt},
	})
}

// notification is the <task-notification> user record Claude writes to the
// transcript when a background task ends (stream-json prints a system
// message instead).
func (c *Converter) notification(s *claude.System) *claude.Record {
	var sb strings.Builder
	sb.WriteString("<task-notification>\n")
	for _, kv := range [][2]string{{"task-id", s.TaskID}, {"tool-use-id", s.ToolUseID}, {"status", s.TaskStatus}, {"summary", s.Summary}} {
		if kv[1] != "" {
			sb.WriteString("<" + kv[0] + ">" + kv[1] + "</" + kv[0] + ">\n")
		}
	}
	sb.WriteString("</task-notification>")
	return mustRecord(map[string]any{
		"type": "user", "sessionId": c.session, "origin": map[string]string{"kind": "task-notification"},
		"message": map[string]any{"role": "user", "content": sb.String()},
	})
}

// Interrupted returns an interrupted tool result for every call still open,
// except those of background subagents (they run on), and forgets them.
func (c *Converter) Interrupted() []*claude.Record {
	return c.Closed(claude.InterruptedForToolText)
}

// Closed is Interrupted with text as the results' content: what ended the
// calls (Claude exited, say), which the app shows on each.
func (c *Converter) Closed(text string) []*claude.Record {
	var out []*claude.Record
	keep := c.order[:0]
	for _, id := range c.order {
		parent, ok := c.open[id]
		if !ok {
			continue
		}
		if a := c.agents[parent]; parent != "" && a != nil && a.background {
			keep = append(keep, id)
			continue
		}
		delete(c.open, id)
		rec := map[string]any{
			"type": "user", "sessionId": c.session,
			"message": map[string]any{"role": "user", "content": []map[string]any{{
				"type": "tool_result", "tool_use_id": id, "is_error": true,
				"content": text,
			}}},
		}
		if parent != "" {
			rec["isSidechain"] = true
			rec["parent_tool_use_id"] = parent
		}
		out = append(out, mustRecord(rec))
	}
	c.order = keep
	return out
}

// mustRecord builds a record from its JSON form (so it has Raw like a read
// one). The maps built here always encode and parse.
func mustRecord(v map[string]any) *claude.Record {
	if ts, ok := v["timestamp"].(int64); ok {
		if ts > 0 {
			v["timestamp"] = time.UnixMilli(ts).UTC().Format(time.RFC3339Nano)
		} else {
			delete(v, "timestamp")
		}
	}
	b, _ := json.Marshal(v)
	r, err := claude.Parse(b)
	if err != nil {
		return &claude.Record{Type: claude.TypeUser, Raw: b}
	}
	return r
}
