// Package claude knows Claude Code's own formats: transcript records, the
// stream-json messages of headless mode, control requests, and where
// transcripts live on disk. It knows nothing about envelopes.
package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ccrelay/ccrelay/internal/jsonscan"
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
	// IsAPIError marks the assistant message Claude writes when an API
	// call failed for good (isApiErrorMessage, is_api_error_message);
	// APIErrorStatus is its HTTP status (0 when none was recorded).
	IsAPIError     bool
	APIErrorStatus int64

	// Retry is set on a system record that says Claude retries a failed
	// API call: api_error in transcripts, api_retry in stream-json.
	Retry *APIRetry
	// Compact is set on a compact_boundary system record.
	Compact *CompactBoundary

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
	// RateLimit and Reset are set on the system records ccrelay makes of
	// stream-json's rate_limit_event and conversation_reset (remote mode).
	RateLimit *RateLimitInfo     `json:"-"`
	Reset     *ConversationReset `json:"-"`
}

// SyntheticModel is the model of the messages Claude Code writes itself
// (an API error, "No response requested.").
const SyntheticModel = "<synthetic>"

// System record subtypes the mapper reads.
const (
	SubtypeAPIError        = "api_error"        // transcript: an API call failed (retried when retryAttempt > 0)
	SubtypeAPIRetry        = "api_retry"        // stream-json: Claude retries a failed API call
	SubtypeCompactBoundary = "compact_boundary" // the conversation was compacted
	SubtypeTurnDuration    = "turn_duration"    // interactive: the turn is over
)

// APIRetry is one retry of a failed API call.
type APIRetry struct {
	Attempt    int64 // 1 for the first retry
	MaxRetries int64
	RetryInMs  int64
	Status     int64 // HTTP status, 0 for none (connection error)
	// Late marks a retry written after the message that followed it:
	// Claude Code before 2.1.330 writes a turn's retries to the transcript
	// only with its next message (after the answer, the API error or the
	// interruption), so they no longer say what Claude is doing
	// (RetriesWrittenLate). Remote mode marks the retries such a Claude
	// prints the same way.
	Late bool
}

// CompactBoundary is where Claude compacted the conversation.
type CompactBoundary struct {
	Trigger    string // "manual" or "auto"
	PreTokens  *int64
	PostTokens *int64
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
	// image
	Source *ImageSource `json:"source"`
}

// ImageSource is where an image block's bytes are: inline base64 data
// (type "base64") or a URL.
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// ErrNotObject is returned for lines that are valid JSON but not an object.
var ErrNotObject = errors.New("not a JSON object")

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
//
// Conversation records are decoded by a scan of the object's keys that
// keeps large values it does not need (tool results, toolUseResult) as raw
// slices of the line, which is several times faster than a full decode.
// Raw values are validated when they are decoded.
func Parse(line []byte) (*Record, error) {
	line = bytes.TrimRight(line, "\r\n")
	r, err := parse(line)
	// A record cut short by a crash, with the next process's first record
	// appended to it: the whole one is read. A conversation record fails to
	// parse then; another type is only checked for its end (D14), so it is
	// validated when a conversation record's start follows its own.
	if err != nil || (!IsConversationType(r.Type) && mayHoldRecordStart(line) && !json.Valid(line)) {
		if rest := tornTail(line); rest != nil {
			if r2, err2 := parse(rest); err2 == nil && IsConversationType(r2.Type) {
				return r2, nil
			}
		}
	}
	return r, err
}

// mayHoldRecordStart reports whether a conversation record may start after
// the first byte of line: Claude's begin with `{"parentUuid":` or
// `{"type":` (a cheap look, done before a full validation).
func mayHoldRecordStart(line []byte) bool {
	if len(line) < 2 {
		return false
	}
	return bytes.Contains(line[1:], []byte(`{"parentUuid":`)) || bytes.Contains(line[1:], []byte(`{"type":`))
}

// Bounds of tornTail's search: a line that fails to parse is tried at its
// last maxTornTries object starts, reading at most maxTornBytes in all.
const (
	maxTornTries = 256
	maxTornBytes = 64 << 20
)

// tornTail returns the whole record at the end of a line that does not
// parse, or nil. Claude appends each record as one write; a process killed
// during a write leaves a line without its end, and the next process
// (resumed) appends its first record to it. The record is the shortest
// valid JSON suffix starting at `{"`: inside strings quotes are escaped, so
// every such start is an object's, and an inner object is never a valid
// suffix (closing brackets follow it).
func tornTail(line []byte) []byte {
	end, read := len(line), 0
	for range maxTornTries {
		if end < 2 {
			return nil
		}
		i := bytes.LastIndex(line[1:end], []byte(`{"`))
		if i < 0 {
			return nil
		}
		i++
		read += len(line) - i
		if read > maxTornBytes {
			return nil
		}
		if json.Valid(line[i:]) {
			return line[i:]
		}
		end = i
	}
	return nil
}

func parse(line []byte) (*Record, error) {
	typ, err := PeekType(line)
	if err != nil {
		return nil, err
	}
	r := &Record{Type: typ, Raw: line}
	if !IsConversationType(typ) {
		return r, nil
	}
	var (
		parentAlt, sessionAlt, agentAlt, toolUseAlt string
		toolUseResultAlt                            []byte
		retry                                       APIRetry
		compact                                     []byte
		apiErrorFlag, errorString                   bool
		version                                     string
	)
	err = eachKey(line, func(k, v []byte) error {
		switch string(k) {
		case "subtype":
			r.Subtype = jsonStr(v)
		case "uuid":
			r.UUID = jsonStr(v)
		case "parentUuid":
			r.ParentUUID = jsonStr(v)
		case "parentUUID":
			parentAlt = jsonStr(v)
		case "sessionId":
			r.SessionID = jsonStr(v)
		case "session_id":
			sessionAlt = jsonStr(v)
		case "agentId":
			r.AgentID = jsonStr(v)
		case "agent_id":
			agentAlt = jsonStr(v)
		case "parent_tool_use_id":
			r.ParentToolUseID = jsonStr(v)
		case "parentToolUseId":
			toolUseAlt = jsonStr(v)
		case "timestamp":
			r.Timestamp = parseTime(v)
		case "isSidechain":
			r.IsSidechain = string(v) == "true"
		case "isMeta", "isSynthetic":
			r.IsMeta = r.IsMeta || truthy(v)
		case "isCompactSummary":
			r.IsCompactSummary = truthy(v)
		case "isApiErrorMessage", "is_api_error_message":
			apiErrorFlag = true
			r.IsAPIError = r.IsAPIError || truthy(v)
		case "apiErrorStatus", "api_error_status", "error_status":
			r.APIErrorStatus = jsonInt(v)
		case "version":
			version = jsonStr(v)
		case "retryAttempt", "attempt":
			retry.Attempt = jsonInt(v)
		case "maxRetries", "max_retries":
			retry.MaxRetries = jsonInt(v)
		case "retryInMs", "retry_delay_ms":
			retry.RetryInMs = jsonInt(v)
		case "error":
			errorString = len(v) > 2 && v[0] == '"'
			if typ == TypeSystem && len(v) > 0 && v[0] == '{' {
				_ = eachKey(v, func(k, v []byte) error {
					if string(k) == "status" {
						retry.Status = jsonInt(v)
					}
					return nil
				})
			}
		case "compactMetadata", "compact_metadata":
			compact = v
		case "origin":
			if len(v) > 0 && v[0] == '{' {
				_ = eachKey(v, func(k, v []byte) error {
					if string(k) == "kind" {
						r.OriginKind = jsonStr(v)
					}
					return nil
				})
			}
		case "message":
			if len(v) > 0 && v[0] == '{' {
				r.Message = parseMessage(v)
			}
		case "toolUseResult":
			r.ToolUseResult = v
		case "tool_use_result":
			toolUseResultAlt = v
		case "summary":
			r.Summary = jsonStr(v)
		case "leafUuid":
			r.LeafUUID = jsonStr(v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode %s record: %w", typ, err)
	}
	if r.ParentUUID == "" {
		r.ParentUUID = parentAlt
	}
	if r.SessionID == "" {
		r.SessionID = sessionAlt
	}
	if r.AgentID == "" {
		r.AgentID = agentAlt
	}
	if r.ParentToolUseID == "" {
		r.ParentToolUseID = toolUseAlt
	}
	if r.ToolUseResult == nil {
		r.ToolUseResult = toolUseResultAlt
	}
	if typ == TypeAssistant && !apiErrorFlag && errorString && r.Message != nil && r.Message.Model == SyntheticModel {
		// Older versions (2.1.197) print the API error message on
		// stream-json without is_api_error_message, with error set.
		r.IsAPIError = true
	}
	if typ == TypeSystem {
		switch r.Subtype {
		case SubtypeAPIError, SubtypeAPIRetry:
			if retry.Status == 0 {
				retry.Status = r.APIErrorStatus
			}
			if retry.Attempt > 0 {
				retry.Late = r.Subtype == SubtypeAPIError && RetriesWrittenLate(version)
				r.Retry = &retry
			}
		case SubtypeCompactBoundary:
			r.Compact = parseCompact(compact)
		}
	}
	return r, nil
}

func parseMessage(v []byte) *Message {
	m := &Message{}
	err := eachKey(v, func(k, v []byte) error {
		switch string(k) {
		case "id":
			m.ID = jsonStr(v)
		case "role":
			m.Role = jsonStr(v)
		case "model":
			m.Model = jsonStr(v)
		case "content":
			m.Content = parseContent(v)
		case "usage":
			if len(v) > 0 && v[0] == '{' {
				m.Usage = v
			}
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return m
}

func parseContent(raw []byte) Content {
	c := Content{Raw: raw}
	if len(raw) == 0 {
		return c
	}
	switch raw[0] {
	case '"':
		if s, ok := unquote(raw); ok {
			c.Present, c.IsString, c.String = true, true, s
		}
	case '[':
		c.Present = true
		c.Blocks = make([]Block, 0, 2)
		if eachElem(raw, func(it []byte) error {
			c.Blocks = append(c.Blocks, parseBlock(it))
			return nil
		}) != nil {
			c.Present, c.Blocks = false, nil
		}
	}
	return c
}

func parseBlock(it []byte) Block {
	if len(it) == 0 || it[0] != '{' {
		return Block{Type: "invalid"}
	}
	var b Block
	err := eachKey(it, func(k, v []byte) error {
		switch string(k) {
		case "type":
			b.Type = jsonStr(v)
		case "text":
			if s, ok := unquote(v); ok {
				b.Text = &s
			}
		case "thinking":
			if s, ok := unquote(v); ok {
				b.Thinking = &s
			}
		case "id":
			b.ID = jsonStr(v)
		case "name":
			b.Name = jsonStr(v)
		case "input":
			b.Input = v
		case "tool_use_id":
			b.ToolUseID = jsonStr(v)
		case "content":
			b.Content = v
		case "is_error":
			b.IsError = string(v) == "true"
		case "source":
			b.Source = parseSource(v)
		}
		return nil
	})
	if err != nil {
		return Block{Type: "invalid"}
	}
	return b
}

// parseSource reads an image block's source; nil if it is not an object.
func parseSource(v []byte) *ImageSource {
	if len(v) == 0 || v[0] != '{' {
		return nil
	}
	src := &ImageSource{}
	if eachKey(v, func(k, v []byte) error {
		switch string(k) {
		case "type":
			src.Type = jsonStr(v)
		case "media_type":
			src.MediaType = jsonStr(v)
		case "data":
			src.Data = jsonStr(v)
		}
		return nil
	}) != nil {
		return nil
	}
	return src
}

func parseCompact(v []byte) *CompactBoundary {
	c := &CompactBoundary{}
	if len(v) == 0 || v[0] != '{' {
		return c
	}
	_ = eachKey(v, func(k, v []byte) error {
		switch string(k) {
		case "trigger":
			c.Trigger = jsonStr(v)
		case "preTokens", "pre_tokens":
			if n, ok := jsonIntOK(v); ok {
				c.PreTokens = &n
			}
		case "postTokens", "post_tokens":
			if n, ok := jsonIntOK(v); ok {
				c.PostTokens = &n
			}
		}
		return nil
	})
	return c
}

// jsonInt is the value of v as a non-negative integer, 0 when it is not one.
func jsonInt(v []byte) int64 {
	n, _ := jsonIntOK(v)
	return n
}

func jsonIntOK(v []byte) (int64, bool) {
	f, ok := jsonNumber(v)
	if !ok || f < 0 || f > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// jsonNumber is the value of the JSON number v as json.Unmarshal into a
// float64 gives it; ok is false when v is not a number it can decode.
func jsonNumber(v []byte) (float64, bool) {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || !jsonscan.Valid(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

// jsonStr is the string value of v, or "" when v is not a string.
func jsonStr(v []byte) string {
	s, _ := unquote(v)
	return s
}

// unquote decodes a JSON string value as json.Unmarshal does.
func unquote(v []byte) (string, bool) { return jsonscan.String(v) }

// truthy follows JavaScript truthiness for the flag fields Claude writes.
func truthy(v []byte) bool {
	switch string(v) {
	case "", "false", "null", "0", `""`:
		return false
	}
	return true
}

func parseTime(v []byte) int64 {
	if len(v) == 0 {
		return 0
	}
	if v[0] == '"' {
		s, ok := unquote(v)
		if !ok {
			return 0
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0
		}
		return t.UnixMilli()
	}
	if f, ok := jsonNumber(v); ok && f > 0 {
		return int64(f)
	}
	return 0
}

// PeekType returns the value of the top-level "type" key of a JSON object
// line without decoding anything else. It reports an error for lines that
// are not a complete JSON object. A missing or non-string type yields "".
func PeekType(line []byte) (string, error) {
	t := bytes.TrimLeft(line, " \t\r\n")
	if len(t) == 0 {
		return "", errors.New("empty line")
	}
	if t[0] != '{' {
		if json.Valid(line) {
			return "", ErrNotObject
		}
		return "", errors.New("invalid JSON")
	}
	typ := ""
	err := eachKey(t, func(k, v []byte) error {
		if string(k) != "type" {
			return nil
		}
		typ = jsonStr(v)
		return errFound
	})
	switch {
	case err == errFound:
		// The type is known: the rest of the line is only checked to end
		// like an object, so a truncated line is still reported.
		if !bytes.HasSuffix(bytes.TrimRight(t, " \t\r\n"), []byte("}")) {
			return "", errTruncated
		}
		return typ, nil
	case err != nil:
		return "", err
	}
	return typ, nil
}

var errFound = errors.New("found")

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

// eachKey calls fn with every key of the JSON object b and the raw bytes of
// its value. It checks the structure (balanced brackets, closed strings,
// commas) but not the tokens inside values it only skips.
func eachKey(b []byte, fn func(k, v []byte) error) error {
	return eachMember(b, '{', '}', fn)
}

// eachElem calls fn with the raw bytes of every element of the JSON array b.
func eachElem(b []byte, fn func(v []byte) error) error {
	return eachMember(b, '[', ']', func(_, v []byte) error { return fn(v) })
}

// eachMember walks the members of an object (open '{': key and value) or
// an array (open '[': value only, key nil).
func eachMember(b []byte, open, close byte, fn func(k, v []byte) error) error {
	p := peeker{b: b}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != open {
		return fmt.Errorf("invalid JSON: expected %q", open)
	}
	p.i++
	for first := true; ; first = false {
		p.ws()
		if p.i >= len(p.b) {
			return errTruncated
		}
		if p.b[p.i] == close {
			return nil
		}
		if !first {
			if p.b[p.i] != ',' {
				return fmt.Errorf("invalid JSON: expected ',' or %q", close)
			}
			p.i++
			p.ws()
		}
		var key []byte
		if open == '{' {
			var err error
			if key, err = p.key(); err != nil {
				return err
			}
		}
		vs := p.i
		if err := p.skipValue(); err != nil {
			return err
		}
		if p.i == vs {
			return errors.New("invalid JSON: unexpected character")
		}
		if err := fn(key, p.b[vs:p.i]); err != nil {
			return err
		}
	}
}

// key consumes `"name" :` and returns the name, unescaped if needed.
func (p *peeker) key() ([]byte, error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, errors.New("invalid JSON: expected a key")
	}
	ks, ke, err := p.str()
	if err != nil {
		return nil, err
	}
	key := p.b[ks:ke]
	if bytes.IndexByte(key, '\\') >= 0 {
		s, _ := unquote(p.b[ks-1 : ke+1])
		key = []byte(s)
	}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != ':' {
		return nil, errors.New("invalid JSON: expected ':'")
	}
	p.i++
	p.ws()
	return key, nil
}

// FileEdit is what an Edit/Write/MultiEdit toolUseResult says about the
// file it changed. Patch is the raw structuredPatch array.
type FileEdit struct {
	Type     string // Write: "create" or "update"; Edit: ""
	FilePath string
	Content  *string // Write: the new file
	Patch    json.RawMessage
}

// ParseFileEdit reads a toolUseResult that holds a structuredPatch. It
// skips the values it does not need (the original file) without decoding
// them. ok is false for anything else.
func ParseFileEdit(raw []byte) (fe FileEdit, ok bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return fe, false
	}
	err := eachKey(raw, func(k, v []byte) error {
		switch string(k) {
		case "type":
			fe.Type = jsonStr(v)
		case "filePath":
			fe.FilePath = jsonStr(v)
		case "content":
			if s, ok := unquote(v); ok {
				fe.Content = &s
			}
		case "structuredPatch":
			if len(v) > 0 && v[0] == '[' {
				fe.Patch = v
			}
		}
		return nil
	})
	return fe, err == nil && fe.FilePath != "" && fe.Patch != nil
}
