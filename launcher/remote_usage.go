package launcher

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

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

// usageBook finds the final usage Claude wrote for a message in its
// transcripts (the main one, background subagents'): Claude prints each
// message with the usage of its start (output_tokens 1, fewer keys) and
// writes the final one, with all its keys, to the transcript once the
// message is complete. Owned by the reader goroutine.
type usageBook struct {
	wait  time.Duration
	tails map[string]*scanner.Tail
	usage map[string]json.RawMessage // record uuid -> usage
	order []string                   // usage's keys, oldest first
	// misses counts lookups in a row that ran out of time: past
	// maxUsageMisses none waits until one finds its usage at once.
	misses int
}

// MaxBookedUsages bounds the usages the book remembers.
const MaxBookedUsages = 4096

// maxUsageMisses is how many lookups in a row may wait in vain before
// lookups no longer wait.
const maxUsageMisses = 3

// maxUsageFiles bounds the transcripts the book follows (a session's and
// its subagents'); past it they are forgotten and read again.
const maxUsageFiles = 64

func newUsageBook(wait time.Duration) *usageBook {
	return &usageBook{wait: wait, tails: map[string]*scanner.Tail{}, usage: map[string]json.RawMessage{}}
}

// find returns the usage the transcript at path holds for the message
// record uuid; with wait, it waits for it up to the book's wait (Claude
// writes the record, and a subagent's file, once the message is complete,
// after it printed it). from is where a transcript not read yet is read
// from. nil when it is not there in time.
func (b *usageBook) find(path string, from int64, uuid string, wait bool) json.RawMessage {
	if u, ok := b.usage[uuid]; ok || path == "" || uuid == "" {
		return u
	}
	t := b.tails[path]
	if t == nil {
		if len(b.tails) >= maxUsageFiles {
			clear(b.tails)
		}
		t = scanner.NewTail(path, scanner.Position{Offset: max(from, 0)})
		b.tails[path] = t
	}
	deadline := time.Now()
	if wait && b.misses < maxUsageMisses {
		deadline = deadline.Add(b.wait)
	}
	for {
		// A file not there yet is waited for as a record not there yet.
		_, _ = t.ReadNew(b.line)
		if u, ok := b.usage[uuid]; ok {
			b.misses = 0
			return u
		}
		if time.Now().After(deadline) {
			if wait {
				b.misses++
			}
			return nil
		}
		time.Sleep(subagentFilePoll)
	}
}

// line books the usage of an assistant message record.
func (b *usageBook) line(l scanner.Line) error {
	if l.TooLong || !bytes.Contains(l.Data, []byte(`"usage"`)) || !bytes.Contains(l.Data, []byte(`"assistant"`)) {
		return nil
	}
	var rec struct {
		Type    string `json:"type"`
		UUID    string `json:"uuid"`
		Message struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(l.Data, &rec) != nil || rec.Type != claude.TypeAssistant || rec.UUID == "" ||
		len(rec.Message.Usage) == 0 || string(rec.Message.Usage) == "null" {
		return nil
	}
	if _, ok := b.usage[rec.UUID]; !ok {
		b.order = append(b.order, rec.UUID)
		if len(b.order) > MaxBookedUsages {
			delete(b.usage, b.order[0])
			b.order = slices.Delete(b.order, 0, 1)
		}
	}
	b.usage[rec.UUID] = bytes.Clone(rec.Message.Usage)
	return nil
}
