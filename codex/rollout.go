// Package codex reads the formats of the Codex CLI (OpenAI's coding agent)
// that ccrelay relays: the rollout files Codex writes for each thread, where
// they live, and which Codex version ccrelay is tested with. It knows
// nothing of envelopes (package mapper turns rollout records into them).
//
// A rollout is JSON Lines, one line per record, each
//
//	{"timestamp":"2026-11-27T15:46:48.908Z","ordinal":0,"type":"session_meta","payload":{…}}
//
// where ordinal counts the file's lines from 0 and type says what the
// payload is. Codex 0.169.0 writes session_meta (first line), world_state,
// turn_context, event_msg (task_started, item_completed, token_count,
// task_complete, turn_aborted, …), response_item (the model-visible history)
// and token_usage_record. Records of other types, and payloads of kinds this
// package does not know, are kept raw (Record.Payload) and decoded no
// further: a caller ignores them explicitly.
package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Record types (the line's "type").
const (
	TypeSessionMeta      = "session_meta"
	TypeTurnContext      = "turn_context"
	TypeEventMsg         = "event_msg"
	TypeResponseItem     = "response_item"
	TypeTokenUsageRecord = "token_usage_record"
	TypeWorldState       = "world_state"
	TypeCompacted        = "compacted"
)

// Event kinds (event_msg payload "type") that ccrelay reads.
const (
	EventTaskStarted   = "task_started"
	EventTaskComplete  = "task_complete"
	EventTurnAborted   = "turn_aborted"
	EventItemCompleted = "item_completed"
	EventTokenCount    = "token_count"
	EventError         = "error"
	EventWarning       = "warning"
	// EventContextCompacted is written when Codex compacted the
	// conversation (not seen in 0.169.0 runs; read when it is there).
	EventContextCompacted = "context_compacted"
)

// Response item kinds (response_item payload "type").
const (
	ItemMessage              = "message"
	ItemReasoning            = "reasoning"
	ItemFunctionCall         = "function_call"
	ItemFunctionCallOutput   = "function_call_output"
	ItemCustomToolCall       = "custom_tool_call"
	ItemCustomToolCallOutput = "custom_tool_call_output"
)

// Typed turn item kinds (event_msg item_completed "item.type").
const (
	TurnItemUserMessage      = "UserMessage"
	TurnItemAgentMessage     = "AgentMessage"
	TurnItemReasoning        = "Reasoning"
	TurnItemCommandExecution = "CommandExecution"
	TurnItemFileChange       = "FileChange"
)

// MaxLineBytes bounds one rollout line. Codex's first line embeds its base
// instructions (22 KB in 0.169.0) and a tool output can be large, but a line
// past this is refused rather than decoded.
const MaxLineBytes = 64 << 20

// MaxOrdinalGap bounds how far a line's ordinal may run ahead of the lines
// before it in its file (the highest ordinal had, or the line's own number
// from 0, whichever is more): Codex numbers a rollout's lines from 0, so a
// line past that is hostile or damaged. Replay and the live follower skip
// it alike (scanner.MaxCodexOrdinalGap).
const MaxOrdinalGap = 1 << 20

// Errors of Parse.
var (
	ErrNotObject = errors.New("not a JSON object")
	ErrTooLong   = fmt.Errorf("rollout line longer than %d bytes", MaxLineBytes)
)

// Record is one rollout line. Exactly one of the typed payload fields is set
// for a known type whose payload decoded; Payload always holds the payload
// as written.
type Record struct {
	// Timestamp is the line's time in Unix milliseconds (0 when missing or
	// not a time).
	Timestamp int64
	// Ordinal is the line's number in its file (from 0); HasOrdinal is
	// false when the line has none.
	Ordinal    int64
	HasOrdinal bool
	Type       string
	Payload    json.RawMessage

	SessionMeta *SessionMeta
	TurnContext *TurnContext
	Event       *Event
	Item        *ResponseItem
	Usage       *TokenUsageRecord
}

type line struct {
	Timestamp string          `json:"timestamp"`
	Ordinal   *int64          `json:"ordinal"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// Parse decodes one rollout line. It never panics. A line that is not a JSON
// object, or is longer than MaxLineBytes, is an error; a known type whose
// payload does not decode is an error too (it is not what Codex writes). An
// unknown type is no error: its Record has only Type, Payload and the line's
// time and ordinal.
func Parse(b []byte) (*Record, error) {
	b = bytes.TrimRight(b, "\r\n")
	if len(b) > MaxLineBytes {
		return nil, ErrTooLong
	}
	t := bytes.TrimLeft(b, " \t")
	if len(t) == 0 || t[0] != '{' {
		return nil, ErrNotObject
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("decode rollout line: %w", err)
	}
	r := &Record{Type: l.Type, Payload: l.Payload}
	if l.Ordinal != nil && *l.Ordinal >= 0 {
		r.Ordinal, r.HasOrdinal = *l.Ordinal, true
	}
	if ts, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil && ts.UnixMilli() > 0 {
		r.Timestamp = ts.UnixMilli()
	}
	if !isObject(l.Payload) {
		switch r.Type {
		case TypeSessionMeta, TypeTurnContext, TypeEventMsg, TypeResponseItem, TypeTokenUsageRecord:
			return nil, fmt.Errorf("rollout %s line: payload is not an object", r.Type)
		}
		return r, nil
	}
	var err error
	switch r.Type {
	case TypeSessionMeta:
		r.SessionMeta = new(SessionMeta)
		err = json.Unmarshal(l.Payload, r.SessionMeta)
	case TypeTurnContext:
		r.TurnContext = new(TurnContext)
		err = json.Unmarshal(l.Payload, r.TurnContext)
	case TypeEventMsg:
		r.Event = new(Event)
		err = json.Unmarshal(l.Payload, r.Event)
	case TypeResponseItem:
		r.Item = new(ResponseItem)
		err = json.Unmarshal(l.Payload, r.Item)
	case TypeTokenUsageRecord:
		r.Usage = new(TokenUsageRecord)
		err = json.Unmarshal(l.Payload, r.Usage)
	}
	if err != nil {
		return nil, fmt.Errorf("decode rollout %s payload: %w", r.Type, err)
	}
	return r, nil
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// SessionMeta is the first line of a rollout: the thread and where it runs.
// Its base instructions (tens of KB) are not kept.
type SessionMeta struct {
	ID            string `json:"id"`
	SessionID     string `json:"session_id"`
	ForkedFromID  string `json:"forked_from_id"`
	Timestamp     string `json:"timestamp"`
	Cwd           string `json:"cwd"`
	Originator    string `json:"originator"`
	CLIVersion    string `json:"cli_version"`
	ModelProvider string `json:"model_provider"`
	ThreadSource  string `json:"thread_source"`
	// ParentThreadID names the thread that spawned this one (a subagent's
	// thread); AgentNickname is the name Codex gave that subagent.
	ParentThreadID string `json:"parent_thread_id"`
	AgentNickname  string `json:"agent_nickname"`
	// Source is "exec", "cli", "vscode", … or, for a subagent's thread, an
	// object (kept raw; see SourceName).
	Source json.RawMessage `json:"source"`
	Git    *GitInfo        `json:"git"`
}

// SourceName is Source when it is a string, else "" (a subagent's thread
// names its parent in an object).
func (s *SessionMeta) SourceName() string {
	var v string
	if json.Unmarshal(s.Source, &v) != nil {
		return ""
	}
	return v
}

// GitInfo is the workspace's git state when the thread started.
type GitInfo struct {
	CommitHash string `json:"commit_hash"`
	Branch     string `json:"branch"`
}

// TurnContext is written at the start of each turn: the settings it runs
// with.
type TurnContext struct {
	TurnID         string          `json:"turn_id"`
	Cwd            string          `json:"cwd"`
	ApprovalPolicy string          `json:"approval_policy"`
	SandboxPolicy  json.RawMessage `json:"sandbox_policy"`
	Model          string          `json:"model"`
	Effort         string          `json:"effort"`
}

// SandboxType is the sandbox policy's type ("read-only", "workspace-write",
// "danger-full-access"), "" when not known.
func (c *TurnContext) SandboxType() string {
	var v struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(c.SandboxPolicy, &v) != nil {
		return ""
	}
	return v.Type
}

// Event is an event_msg payload. Type says which of the fields are set.
type Event struct {
	Type   string `json:"type"`
	TurnID string `json:"turn_id"`

	// task_started
	ModelContextWindow *int64           `json:"model_context_window"`
	TurnAttribution    *TurnAttribution `json:"turn_attribution"`

	// task_complete
	LastAgentMessage *string    `json:"last_agent_message"`
	Error            *TurnError `json:"error"`
	DurationMs       *int64     `json:"duration_ms"`

	// turn_aborted: "interrupted", "replaced", "review_ended", …
	Reason string `json:"reason"`

	// item_completed
	Item *TurnItem `json:"item"`

	// token_count
	Info       *TokenInfo      `json:"info"`
	RateLimits json.RawMessage `json:"rate_limits"`

	// error, warning
	Message string `json:"message"`
}

// TurnAttribution says what started a turn (a subagent's turns name their
// parent's).
type TurnAttribution struct {
	TurnTrigger  *string `json:"turn_trigger"`
	ParentTurnID *string `json:"parent_turn_id"`
	RootTurnID   *string `json:"root_turn_id"`
}

// TurnError is why a turn failed (task_complete "error"): Message is what
// the model provider answered, often its JSON error body.
type TurnError struct {
	Message        string          `json:"message"`
	CodexErrorInfo json.RawMessage `json:"codex_error_info"`
}

// TokenInfo is a token_count's usage: the thread's total and the last
// model request's.
type TokenInfo struct {
	Total              *TokenUsage `json:"total_token_usage"`
	Last               *TokenUsage `json:"last_token_usage"`
	ModelContextWindow *int64      `json:"model_context_window"`
}

// TokenUsage is the usage of one or more model requests. InputTokens
// includes CachedInputTokens, and OutputTokens ReasoningOutputTokens (the
// Responses API's counting).
type TokenUsage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
	TotalTokens           int64 `json:"total_tokens"`
}

// TokenUsageRecord is written after each model response: its usage, and the
// turn's and the thread's so far.
type TokenUsageRecord struct {
	TurnID           string      `json:"turn_id"`
	ResponseID       string      `json:"response_id"`
	Usage            *TokenUsage `json:"usage"`
	TurnTokenUsage   *TokenUsage `json:"turn_token_usage"`
	ThreadTokenUsage *TokenUsage `json:"thread_token_usage"`
}
