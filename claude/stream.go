package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Stream-json message types printed by `claude -p --output-format
// stream-json` (and read with --input-format stream-json).
const (
	StreamSystem          = "system"
	StreamUser            = "user"
	StreamAssistant       = "assistant"
	StreamResult          = "result"
	StreamEvent           = "stream_event"
	StreamControlRequest  = "control_request"
	StreamControlResponse = "control_response"
	StreamControlCancel   = "control_cancel_request"
	// StreamRateLimit says the account's rate limit changed (Claude Code
	// 2.1.330: {"type":"rate_limit_event","rate_limit_info":{…}}).
	StreamRateLimit = "rate_limit_event"
	// StreamConversationReset says the conversation was discarded
	// (/clear, leaving plan mode with a clear context, …).
	StreamConversationReset = "conversation_reset"
)

// RateLimitInfo is a rate_limit_event's rate_limit_info (the fields ccrelay
// shows; others are ignored).
type RateLimitInfo struct {
	Status        string   `json:"status"` // allowed | allowed_warning | rejected
	ResetsAt      int64    `json:"resetsAt,omitempty"`
	RateLimitType string   `json:"rateLimitType,omitempty"` // five_hour, seven_day, …
	Utilization   *float64 `json:"utilization,omitempty"`
}

// ConversationReset is a conversation_reset message.
type ConversationReset struct {
	NewConversationID string `json:"new_conversation_id"`
	Trigger           string `json:"trigger"` // clear | plan_mode_exit | fresh_session | onboarding
	// UserMessageUUID is the uuid of the record of the command that reset
	// the conversation (/clear), in the new session's transcript.
	UserMessageUUID string `json:"user_message_uuid,omitempty"`
}

// StreamMessage is one stream-json line. User and assistant messages are
// parsed as a Record (same uuid as the transcript record); the other types
// keep their payload decoded into the matching field. Unknown types keep
// only Type and Raw.
type StreamMessage struct {
	Type    string
	Subtype string
	// UUID and SessionID as printed (session_id in stream-json).
	UUID      string
	SessionID string

	Record  *Record         // user, assistant
	Result  *Result         // result
	Control *ControlRequest // control_request
	// Response is the decoded control_response.
	Response *ControlResponse
	// System is the decoded system message.
	System *System
	// Event is the raw API stream event of a stream_event line.
	Event json.RawMessage
	// ParentToolUseID of a stream_event line.
	ParentToolUseID string
	// IsReplay: a user line that echoes a prompt written to Claude's stdin
	// (--replay-user-messages).
	IsReplay bool
	// RateLimit of a rate_limit_event, Reset of a conversation_reset.
	RateLimit *RateLimitInfo
	Reset     *ConversationReset

	Raw []byte
}

// Result closes one turn in stream-json mode.
type Result struct {
	Subtype        string          `json:"subtype"`
	IsError        bool            `json:"is_error"`
	Result         string          `json:"result"`
	StopReason     string          `json:"stop_reason"`
	TerminalReason string          `json:"terminal_reason"`
	NumTurns       int             `json:"num_turns"`
	DurationMS     int64           `json:"duration_ms"`
	TotalCostUSD   float64         `json:"total_cost_usd"`
	Usage          json.RawMessage `json:"usage"`
	ModelUsage     map[string]struct {
		ContextWindow int64 `json:"contextWindow"`
	} `json:"modelUsage"`
	Origin *struct {
		Kind string `json:"kind"`
	} `json:"origin"`
}

// ControlRequest is a request from Claude (can_use_tool) or to Claude
// (interrupt, initialize, set_permission_mode, set_model).
type ControlRequest struct {
	RequestID string `json:"request_id"`
	Request   struct {
		Subtype               string          `json:"subtype"`
		ToolName              string          `json:"tool_name"`
		DisplayName           string          `json:"display_name"`
		Input                 json.RawMessage `json:"input"`
		Description           string          `json:"description"`
		ToolUseID             string          `json:"tool_use_id"`
		AgentID               string          `json:"agent_id"`
		BlockedPath           string          `json:"blocked_path"`
		PermissionSuggestions json.RawMessage `json:"permission_suggestions"`
		Mode                  string          `json:"mode"`
		Model                 string          `json:"model"`
	} `json:"request"`
}

// ControlResponse answers a control request.
type ControlResponse struct {
	Response struct {
		Subtype   string          `json:"subtype"`
		RequestID string          `json:"request_id"`
		Response  json.RawMessage `json:"response"`
		Error     string          `json:"error"`
	} `json:"response"`
}

// ParseStream decodes one stream-json line.
func ParseStream(line []byte) (*StreamMessage, error) {
	typ, err := PeekType(line)
	if err != nil {
		return nil, err
	}
	m := &StreamMessage{Type: typ, Raw: line}
	var head struct {
		Subtype         string          `json:"subtype"`
		UUID            string          `json:"uuid"`
		SessionID       string          `json:"session_id"`
		ParentToolUseID string          `json:"parent_tool_use_id"`
		Event           json.RawMessage `json:"event"`
	}
	switch typ {
	case StreamUser, StreamAssistant:
		r, err := Parse(line)
		if err != nil {
			return nil, err
		}
		m.Record, m.UUID, m.SessionID = r, r.UUID, r.SessionID
		m.IsReplay = typ == StreamUser && isReplay(line)
		return m, nil
	case StreamResult:
		m.Result = new(Result)
		if err := json.Unmarshal(line, m.Result); err != nil {
			return nil, fmt.Errorf("decode result: %w", err)
		}
	case StreamSystem:
		sys, err := parseSystem(line)
		if err != nil {
			return nil, err
		}
		m.System = sys
	case StreamControlRequest:
		m.Control = new(ControlRequest)
		if err := json.Unmarshal(line, m.Control); err != nil {
			return nil, fmt.Errorf("decode control_request: %w", err)
		}
		m.Subtype = m.Control.Request.Subtype
	case StreamRateLimit:
		var v struct {
			Info *RateLimitInfo `json:"rate_limit_info"`
		}
		if err := json.Unmarshal(line, &v); err != nil || v.Info == nil {
			return nil, fmt.Errorf("decode rate_limit_event: %v", cmpErr(err, "no rate_limit_info"))
		}
		m.RateLimit = v.Info
	case StreamConversationReset:
		m.Reset = new(ConversationReset)
		if err := json.Unmarshal(line, m.Reset); err != nil {
			return nil, fmt.Errorf("decode conversation_reset: %w", err)
		}
	case StreamControlResponse:
		m.Response = new(ControlResponse)
		if err := json.Unmarshal(line, m.Response); err != nil {
			return nil, fmt.Errorf("decode control_response: %w", err)
		}
		m.Subtype = m.Response.Response.Subtype
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("decode %s message: %w", typ, err)
	}
	if m.Subtype == "" {
		m.Subtype = head.Subtype
	}
	m.UUID, m.SessionID, m.Event, m.ParentToolUseID = head.UUID, head.SessionID, head.Event, head.ParentToolUseID
	return m, nil
}

// cmpErr is err, or an error saying why when err is nil.
func cmpErr(err error, why string) error {
	if err != nil {
		return err
	}
	return errors.New(why)
}

// isReplay reports whether a user line has "isReplay": true at any depth
// of its JSON structure. Inside a JSON string every quote is escaped, so
// the unescaped key can only be structure; Claude Code sets it at the top.
func isReplay(line []byte) bool {
	i := bytes.Index(line, []byte(`"isReplay"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(line[i+len(`"isReplay"`):], " \t")
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	return bytes.HasPrefix(bytes.TrimLeft(rest[1:], " \t"), []byte("true"))
}
