package mapper

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/jsonscan"
	"github.com/ccrelay/ccrelay/protocol"
)

const (
	maxTitleRunes = 80
	cutTitleRunes = 77
)

// input is a decoded tool input object; nil for non-objects.
type input map[string]json.RawMessage

func decodeInput(raw json.RawMessage) input {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var in input
	if json.Unmarshal(raw, &in) != nil {
		return nil
	}
	return in
}

func (in input) str(key string) string {
	raw, ok := in[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	s, _ := jsonscan.String(raw)
	return s
}

// fields are a tool input's values by key: an input, or a rawInput.
type fields interface{ str(key string) string }

// rawInput is a tool input object, valid JSON; nil for anything else. Its
// values are read where they are used, without decoding the rest: what
// decodeInput gives, without a map per tool call.
type rawInput []byte

func scanInput(raw json.RawMessage) rawInput {
	if len(raw) == 0 || raw[0] != '{' || !jsonscan.Valid(raw) {
		return nil
	}
	return rawInput(raw)
}

// str is the string value of key (the last, if the key is there twice, as
// a decode into a map keeps it), "" when it is missing or not a string.
func (in rawInput) str(key string) string {
	if in == nil {
		return ""
	}
	var val []byte
	_ = jsonscan.EachMember(in, func(k, v []byte) error {
		if string(k) == key {
			val = v
		}
		return nil
	})
	if len(val) == 0 || val[0] != '"' {
		return ""
	}
	s, _ := jsonscan.String(val)
	return s
}

// toolTitle: a non-blank input.description (cut to 77 characters + "..."
// when longer than 80), else "<name> call".
func toolTitle(name string, in fields) string {
	d := in.str("description")
	if strings.TrimSpace(d) == "" {
		return name + " call"
	}
	if utf8.RuneCountInString(d) > maxTitleRunes {
		r := []rune(d)
		return string(r[:cutTitleRunes]) + "..."
	}
	return d
}

// subagentTitle: the first non-blank of description, title, subagent_type
// (trimmed), else the trimmed prompt.
func subagentTitle(in fields) string {
	for _, k := range []string{"description", "title", "subagent_type", "prompt"} {
		if v := strings.TrimSpace(in.str(k)); v != "" {
			return v
		}
	}
	return ""
}

// toolArgs: an object input as is; a missing input as {}; anything else
// wrapped as {"input": <value>}.
func toolArgs(raw json.RawMessage) json.RawMessage {
	return capArgs(wrapArgs(raw))
}

// Tool inputs larger than MaxArgsBytes are capped so that their envelope
// stays within protocol.MaxEnvelopeBytes (a tool input Claude writes has no
// bound of its own: one Write of a generated file can be many megabytes).
const (
	// MaxArgsBytes bounds a tool-call-start's args as the mapper writes
	// them; larger args are capped.
	MaxArgsBytes = 1 << 20
	// MaxArgStringBytes: a capped args object keeps at most this much of
	// each string at its top level (cut at a UTF-8 boundary).
	MaxArgStringBytes = 64 << 10
	// CutKey names the member a capped args object gains: an object of the
	// fields that were cut, each with its full size in bytes (of the
	// string's text, or of the whole input's JSON for "input").
	CutKey = "ccrelayCut"
)

// capArgs returns args (a JSON object) unchanged when it is at most
// MaxArgsBytes; otherwise the object with each top-level string longer
// than MaxArgStringBytes cut to that and named in CutKey with its full
// size; if that is still too large, {"input": the first MaxArgStringBytes
// of the JSON text, CutKey: {"input": its size}}. The result is a pure
// function of args.
func capArgs(args json.RawMessage) json.RawMessage {
	if len(args) <= MaxArgsBytes {
		return args
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) == nil {
		cut := map[string]int{}
		for k, v := range obj {
			if len(v) <= MaxArgStringBytes || v[0] != '"' {
				continue
			}
			var s string
			if json.Unmarshal(v, &s) != nil {
				continue
			}
			p, _ := Preview(s, MaxArgStringBytes)
			obj[k], _ = json.Marshal(p)
			cut[k] = len(s)
		}
		if len(cut) > 0 {
			obj[CutKey], _ = json.Marshal(cut)
			if b, err := json.Marshal(obj); err == nil && len(b) <= MaxArgsBytes {
				return b
			}
		}
	}
	p, _ := Preview(string(args), MaxArgStringBytes)
	b, _ := json.Marshal(struct {
		Input string         `json:"input"`
		Cut   map[string]int `json:"ccrelayCut"`
	}{p, map[string]int{"input": len(args)}})
	return b
}

func wrapArgs(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return json.RawMessage("{}")
	}
	if !jsonscan.Valid(t) {
		// The parser keeps values it does not need as raw bytes; a broken
		// input is passed on as text rather than as broken JSON.
		s, _ := json.Marshal(string(t))
		return json.RawMessage(append(append([]byte(`{"input":`), s...), '}'))
	}
	if t[0] == '{' {
		return t
	}
	return json.RawMessage(append(append([]byte(`{"input":`), t...), '}'))
}

// asyncLaunch reports whether a Task/Agent tool_result says the subagent was
// launched in the background (D13), and the agent id it names.
func asyncLaunch(r *claude.Record, b *claude.Block) (string, bool) {
	tur := decodeLaunch(r.ToolUseResult)
	if tur.IsAsync || tur.Status == "async_launched" {
		return tur.AgentID, true
	}
	if b.IsError {
		return "", false
	}
	if text := claude.ToolResultText(b.Content); strings.HasPrefix(strings.TrimSpace(text), "Async agent launched") {
		return agentIDFromText(text), true
	}
	return "", false
}

var agentIDRe = regexp.MustCompile(`agentId: ([A-Za-z0-9_-]+)`)

func agentIDFromText(s string) string {
	if m := agentIDRe.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// resultAgentID is the agentId of a synchronous subagent's result, if any.
func resultAgentID(r *claude.Record) string {
	return decodeLaunch(r.ToolUseResult).AgentID
}

// launch is what a Task/Agent toolUseResult says of the subagent.
type launch struct {
	IsAsync bool   `json:"isAsync"`
	Status  string `json:"status"`
	AgentID string `json:"agentId"`
}

// decodeLaunch reads raw (a toolUseResult) as json.Unmarshal into a launch
// does, its error ignored: nothing when raw is not a valid object, else
// each field whose value has its type. A key that is not ASCII (which
// encoding/json may fold onto a field) goes to json.Unmarshal.
func decodeLaunch(raw []byte) launch {
	var l launch
	if len(raw) == 0 || raw[0] != '{' || !jsonscan.Valid(raw) {
		return l
	}
	err := jsonscan.EachMember(raw, func(k, v []byte) error {
		for _, c := range k {
			if c >= utf8.RuneSelf {
				return errScan
			}
		}
		switch strings.ToLower(string(k)) {
		case "isasync":
			switch string(v) {
			case "true":
				l.IsAsync = true
			case "false":
				l.IsAsync = false
			}
		case "status":
			if s, ok := jsonscan.String(v); ok {
				l.Status = s
			}
		case "agentid":
			if s, ok := jsonscan.String(v); ok {
				l.AgentID = s
			}
		}
		return nil
	})
	if err != nil {
		l = launch{}
		_ = json.Unmarshal(raw, &l)
	}
	return l
}

const notificationTag = "<task-notification>"

func isTaskNotification(r *claude.Record) bool {
	if r.OriginKind == "task-notification" {
		return true
	}
	return strings.HasPrefix(strings.TrimSpace(userText(r)), notificationTag)
}

// userText is the string content of a user record, or its text blocks
// joined by newlines.
func userText(r *claude.Record) string {
	if r.Message == nil {
		return ""
	}
	c := &r.Message.Content
	if c.IsString {
		return c.String
	}
	var sb strings.Builder
	for i := range c.Blocks {
		if b := &c.Blocks[i]; b.Type == "text" && b.Text != nil {
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(*b.Text)
		}
	}
	return sb.String()
}

// taskNotification handles a <task-notification> user record (D13): not a
// user prompt; it closes nothing, stops the subagent it reports on, and
// emits a service envelope. The model's follow-up belongs to the same turn.
func (m *Mapper) taskNotification(r *claude.Record, src string) {
	text := userText(r)
	taskID := claude.Markup(text, "task-id")
	provider := claude.Markup(text, "tool-use-id")
	if provider == "" {
		provider = m.agents[taskID]
	}
	status := claude.Markup(text, "status")
	summary := claude.Markup(text, "summary")
	if taskID != "" {
		// Ids come from the task, not the record (D17): remote mode builds
		// this record from Claude's task_notification message.
		src = m.derive("notification:"+taskID, src)
	}

	m.ensureTurn(r)
	var s *subagent
	if provider != "" {
		if _, buffered := m.buffered["agent:"+taskID]; buffered {
			s = m.subFor(provider)
			s.hidden = true
			m.linkAgent(taskID, provider)
			m.flushAgent(taskID)
		}
		s = m.subs[provider]
		if s != nil && s.hidden {
			m.linkAgent(taskID, provider)
		}
	}
	var msg string
	switch {
	case s != nil && s.hidden && s.title != "":
		msg = "Agent “" + s.title + "” " + statusWord(status)
	case summary != "":
		msg = summary
	case taskID != "":
		msg = "Background task " + taskID + " " + statusWord(status)
	default:
		msg = "Background task " + statusWord(status)
	}
	if s != nil {
		m.stop(s, src)
		s.done = true
		s.background = false
	}
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, src, "service"), nil, "",
		protocol.Event{T: protocol.KindService, Text: msg})
}

func statusWord(status string) string {
	switch status {
	case "":
		return "finished"
	case "killed":
		return "stopped"
	}
	return status
}

// The output of slash commands Claude Code runs itself (/model, /mcp, …) is
// written as user records wrapped in these tags: not words to the model,
// and remote mode sees only some of them (D17). The command itself
// (<command-name>) is kept: it is what the user typed.
var commandTags = []string{"<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>"}

func isCommandRecord(r *claude.Record) bool {
	t := strings.TrimSpace(userText(r))
	for _, tag := range commandTags {
		if strings.HasPrefix(t, tag) {
			return true
		}
	}
	return false
}
