// Package claude knows Claude Code's own formats: transcript records, the
// stream-json messages of headless mode, control requests, and where
// transcripts live on disk. It knows nothing about envelopes.
package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Record types that carry conversation. Every other type (attachment,
// queue-operation, api-request, progress, file-history-snapshot, …) is
// skipped by the mapper without decoding more than its type (DECISIONS D14).
const (
	TypeUser      = "user"
	TypeAssistant = "assistant"
	TypeSystem    = "system"
	TypeSummary   = "summary"
)

// Record is one transcript line (or one stream-json user/assistant message
// converted to the same shape). Parsing is lenient: unknown fields are
// ignored and kept in Raw.
type Record struct {
	Type    string
	Subtype string // system records

	UUID       string
	ParentUUID string
	SessionID  string
	// AgentID is set on subagent records (files under <session>/subagents/).
	AgentID string
	// ParentToolUseID is stream-json's parent_tool_use_id (or the camelCase
	// variant): the tool_use id of the subagent that produced the record.
	ParentToolUseID string
	// Timestamp is the record time in Unix milliseconds, 0 when absent.
	Timestamp int64

	IsSidechain      bool
	IsMeta           bool
	IsCompactSummary bool
	IsAPIError       bool

	// OriginKind is origin.kind ("task-notification" for background-task
	// follow-ups).
	OriginKind string

	Message *Message

	// ToolUseResult is the raw toolUseResult (transcripts) or
	// tool_use_result (stream-json) of a user tool_result record.
	ToolUseResult json.RawMessage

	// Summary records.
	Summary  string
	LeafUUID string

	// Raw is the line the record was parsed from (without the newline).
	Raw []byte
}

// Message is the API message inside a user or assistant record.
type Message struct {
	ID    string
	Role  string
	Model string
	// Content is the message content: a string or a list of blocks.
	Content Content
	// Usage is the raw usage object, nil when absent.
	Usage json.RawMessage
}

// Content is either a plain string or a list of blocks.
type Content struct {
	Present  bool
	IsString bool
	String   string
	Blocks   []Block
	// Raw is the content as it appeared in the line.
	Raw json.RawMessage
}

// Block is one content block. Only the fields the mapper needs are decoded;
// unknown block types keep their Type and nothing else.
type Block struct {
	Type string `json:"type"`
	// text
	Text *string `json:"text"`
	// thinking
	Thinking *string `json:"thinking"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// ErrNotObject is returned for lines that are valid JSON but not an object.
var ErrNotObject = errors.New("not a JSON object")

// wire is the decoding shape of conversation records.
type wire struct {
	Type             string          `json:"type"`
	Subtype          string          `json:"subtype"`
	UUID             any             `json:"uuid"`
	ParentUUID       any             `json:"parentUuid"`
	ParentUUIDAlt    any             `json:"parentUUID"`
	SessionID        any             `json:"sessionId"`
	SessionIDSnake   any             `json:"session_id"`
	AgentID          any             `json:"agentId"`
	AgentIDSnake     any             `json:"agent_id"`
	ParentToolUse    any             `json:"parent_tool_use_id"`
	ParentToolUseAlt any             `json:"parentToolUseId"`
	Timestamp        any             `json:"timestamp"`
	IsSidechain      any             `json:"isSidechain"`
	IsMeta           any             `json:"isMeta"`
	IsSynthetic      any             `json:"isSynthetic"`
	IsCompactSummary any             `json:"isCompactSummary"`
	IsAPIError       any             `json:"isApiErrorMessage"`
	Origin           json.RawMessage `json:"origin"`
	Message          json.RawMessage `json:"message"`
	ToolUseResult    json.RawMessage `json:"toolUseResult"`
	ToolUseResultAlt json.RawMessage `json:"tool_use_result"`
	Summary          any             `json:"summary"`
	LeafUUID         any             `json:"leafUuid"`
}

type wireMessage struct {
	ID      any             `json:"id"`
	Role    any             `json:"role"`
	Model   any             `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   json.RawMessage `json:"usage"`
}

// IsConversationType reports whether records of type t can produce
// envelopes and are therefore decoded in full.
func IsConversationType(t string) bool {
	switch t {
	case TypeUser, TypeAssistant, TypeSystem, TypeSummary:
		return true
	}
	return false
}

// Parse decodes one line. For types that are not conversation it decodes
// only the type (D14) and returns a Record with just Type and Raw. It never
// panics; malformed input returns an error that says why.
func Parse(line []byte) (*Record, error) {
	line = bytes.TrimRight(line, "\r\n")
	typ, err := PeekType(line)
	if err != nil {
		return nil, err
	}
	if !IsConversationType(typ) {
		return &Record{Type: typ, Raw: line}, nil
	}
	var w wire
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("decode %s record: %w", typ, err)
	}
	r := &Record{
		Type:             typ,
		Subtype:          str(w.Subtype),
		UUID:             str(w.UUID),
		ParentUUID:       firstStr(w.ParentUUID, w.ParentUUIDAlt),
		SessionID:        firstStr(w.SessionID, w.SessionIDSnake),
		AgentID:          firstStr(w.AgentID, w.AgentIDSnake),
		ParentToolUseID:  firstStr(w.ParentToolUse, w.ParentToolUseAlt),
		Timestamp:        parseTime(w.Timestamp),
		IsSidechain:      w.IsSidechain == true,
		IsMeta:           truthy(w.IsMeta) || truthy(w.IsSynthetic),
		IsCompactSummary: truthy(w.IsCompactSummary),
		IsAPIError:       truthy(w.IsAPIError),
		Summary:          str(w.Summary),
		LeafUUID:         str(w.LeafUUID),
		Raw:              line,
	}
	r.ToolUseResult = w.ToolUseResult
	if r.ToolUseResult == nil {
		r.ToolUseResult = w.ToolUseResultAlt
	}
	if len(w.Origin) > 0 && w.Origin[0] == '{' {
		var o struct {
			Kind any `json:"kind"`
		}
		if json.Unmarshal(w.Origin, &o) == nil {
			r.OriginKind = str(o.Kind)
		}
	}
	if len(w.Message) > 0 && w.Message[0] == '{' {
		var wm wireMessage
		if err := json.Unmarshal(w.Message, &wm); err == nil {
			m := &Message{ID: str(wm.ID), Role: str(wm.Role), Model: str(wm.Model)}
			if len(wm.Usage) > 0 && wm.Usage[0] == '{' {
				m.Usage = wm.Usage
			}
			m.Content = parseContent(wm.Content)
			r.Message = m
		}
	}
	return r, nil
}

func parseContent(raw json.RawMessage) Content {
	c := Content{Raw: raw}
	if len(raw) == 0 {
		return c
	}
	switch raw[0] {
	case '"':
		if json.Unmarshal(raw, &c.String) == nil {
			c.Present, c.IsString = true, true
		}
	case '[':
		// Decode block by block so that one malformed block does not lose
		// the others.
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return c
		}
		c.Present = true
		c.Blocks = make([]Block, 0, len(items))
		for _, it := range items {
			var b Block
			if len(it) == 0 || it[0] != '{' || json.Unmarshal(it, &b) != nil {
				b = Block{Type: "invalid"}
			}
			c.Blocks = append(c.Blocks, b)
		}
	}
	return c
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func firstStr(vs ...any) string {
	for _, v := range vs {
		if s := str(v); s != "" {
			return s
		}
	}
	return ""
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case nil:
		return false
	}
	return true
}

func parseTime(v any) int64 {
	switch x := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return 0
		}
		return t.UnixMilli()
	case float64:
		if x > 0 {
			return int64(x)
		}
	}
	return 0
}

// PeekType returns the value of the top-level "type" key of a JSON object
// line without decoding anything else. It reports an error for lines that
// are not a complete JSON object. A missing or non-string type yields "".
func PeekType(line []byte) (string, error) {
	p := peeker{b: line}
	p.ws()
	if p.i >= len(p.b) {
		return "", errors.New("empty line")
	}
	if p.b[p.i] != '{' {
		if json.Valid(line) {
			return "", ErrNotObject
		}
		return "", errors.New("invalid JSON")
	}
	p.i++
	typ := ""
	for {
		p.ws()
		if p.i >= len(p.b) {
			return "", errTruncated
		}
		if p.b[p.i] == '}' {
			p.i++
			break
		}
		if p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.b[p.i] != '"' {
			return "", errors.New("invalid JSON: expected a key")
		}
		ks, ke, err := p.str()
		if err != nil {
			return "", err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return "", errors.New("invalid JSON: expected ':'")
		}
		p.i++
		p.ws()
		if string(p.b[ks:ke]) == "type" && p.i < len(p.b) && p.b[p.i] == '"' {
			vs, ve, err := p.str()
			if err != nil {
				return "", err
			}
			if bytes.IndexByte(p.b[vs:ve], '\\') >= 0 || !utf8.Valid(p.b[vs:ve]) {
				var s string
				if json.Unmarshal(p.b[vs-1:ve+1], &s) != nil {
					return "", errors.New("invalid JSON string")
				}
				typ = s
			} else {
				typ = string(p.b[vs:ve])
			}
			// The type is known: the rest of the line is only checked to end
			// like an object, so a truncated line is still reported.
			if !bytes.HasSuffix(bytes.TrimRight(p.b, " \t\r\n"), []byte("}")) {
				return "", errTruncated
			}
			return typ, nil
		}
		if err := p.skipValue(); err != nil {
			return "", err
		}
	}
	return typ, nil
}

var errTruncated = errors.New("truncated JSON (line ends early)")

type peeker struct {
	b []byte
	i int
}

func (p *peeker) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

// str consumes a string at p.i and returns the bounds of its contents.
func (p *peeker) str() (int, int, error) {
	p.i++ // opening quote
	start := p.i
	for {
		j := bytes.IndexByte(p.b[p.i:], '"')
		if j < 0 {
			return 0, 0, errTruncated
		}
		end := p.i + j
		// Count the backslashes before the quote.
		n := 0
		for k := end - 1; k >= start && p.b[k] == '\\'; k-- {
			n++
		}
		p.i = end + 1
		if n%2 == 0 {
			return start, end, nil
		}
	}
}

func (p *peeker) skipValue() error {
	if p.i >= len(p.b) {
		return errTruncated
	}
	switch p.b[p.i] {
	case '"':
		_, _, err := p.str()
		return err
	case '{', '[':
		depth := 0
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case '"':
				if _, _, err := p.str(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					p.i++
					return nil
				}
			}
			p.i++
		}
		return errTruncated
	default:
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return nil
			}
			p.i++
		}
		return errTruncated
	}
}
