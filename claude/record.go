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
		if ms, ok := utcMillis(v); ok {
			return ms
		}
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

// utcMillis reads the time Claude writes, "2006-01-02T15:04:05.000Z" (a
// JSON string, the fraction of 1 to 9 digits or none), without making a
// string of it; ok is false for anything else, which time.Parse reads.
// What it reads, time.Parse(time.RFC3339Nano) reads the same.
func utcMillis(v []byte) (int64, bool) {
	if len(v) < 22 || v[0] != '"' || v[len(v)-1] != '"' || v[len(v)-2] != 'Z' {
		return 0, false
	}
	s := v[1 : len(v)-2]
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	num := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(s[0:4]), num(s[5:7]), num(s[8:10])
	hour, minute, sec := num(s[11:13]), num(s[14:16]), num(s[17:19])
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 ||
		minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return 0, false
	}
	if day > time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return 0, false
	}
	nsec := 0
	if frac := s[19:]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return 0, false
		}
		if nsec = num(frac[1:]); nsec < 0 {
			return 0, false
		}
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC).UnixMilli(), true
}

// PeekType returns the value of the top-level "type" key of a JSON object
// line without decoding anything else. It reports an error for lines that
// are not a complete JSON object. A missing or non-string type yields "".
func PeekType(line []byte) (string, error) {
	typ, _, _, err := peekType(line, false)
	return typ, err
}

// PeekTypeLink is PeekType that also returns the line's place in the
// parent chain, for a line that is not conversation (an attachment, a
// progress record; a conversation record's is parsed with it): its
// parentUuid, looked for before its type, where Claude writes it (a line
// without it there is not in the chain: "", ""), and its uuid, looked for
// first among the line's last bytes, where Claude writes it after a large
// value (progress data), and only then in the rest of the line.
func PeekTypeLink(line []byte) (typ, uuid, parent string, err error) {
	return peekType(line, true)
}

func peekType(line []byte, link bool) (typ, uuid, parent string, err error) {
	t := bytes.TrimLeft(line, " \t\r\n")
	if len(t) == 0 {
		return "", "", "", errors.New("empty line")
	}
	if t[0] != '{' {
		if jsonscan.Valid(line) {
			return "", "", "", ErrNotObject
		}
		return "", "", "", errors.New("invalid JSON")
	}
	closed := bytes.HasSuffix(bytes.TrimRight(t, " \t\r\n"), []byte("}"))
	hasParent, typed := false, false
	err = eachKey(t, func(k, v []byte) error {
		switch string(k) {
		case "type":
			typ, typed = jsonStr(v), true
			if !link || !hasParent || uuid != "" || !closed || IsConversationType(typ) {
				return errFound
			}
			if u, ok := tailUUID(bytes.TrimRight(t, " \t\r\n")); ok {
				uuid = jsonStr(u)
				return errFound
			}
		case "parentUuid":
			if link && !typed {
				hasParent, parent = true, jsonStr(v) // null: ""
			}
		case "uuid":
			if link && hasParent {
				uuid = jsonStr(v)
				if typed {
					return errFound
				}
			}
		}
		return nil
	})
	if !hasParent || uuid == "" || IsConversationType(typ) || (err != nil && err != errFound) {
		uuid, parent = "", "" // (a flaw after the type: no link, as PeekType)
	}
	switch {
	case typed:
		// The type is known: the rest of the line is only checked to end
		// like an object, so a truncated line is still reported.
		if !closed {
			return "", "", "", errTruncated
		}
		return typ, uuid, parent, nil
	case err != nil:
		return "", "", "", err
	}
	return typ, uuid, parent, nil
}

var errFound = errors.New("found")

var errTruncated = errors.New("truncated JSON (line ends early)")

type peeker struct {
	b []byte
	i int
	c *strCache // strings made before (LineParser), or nil
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
// Its first bytes are looked at one by one (most strings of a record are
// short: keys, ids, flags), the rest searched for a quote.
func (p *peeker) str() (int, int, error) {
	p.i++ // opening quote
	start := p.i
	b := p.b
	i := start
	for n := min(len(b), start+shortString); i < n; i++ {
		switch b[i] {
		case '"':
			p.i = i + 1
			return start, i, nil
		case '\\':
			i++ // the escaped byte
		}
	}
	// i is not inside an escape: backslashes before a quote are counted
	// back to it.
	from := min(i, len(b))
	p.i = from
	for {
		j := bytes.IndexByte(b[p.i:], '"')
		if j < 0 {
			p.i = len(b)
			return 0, 0, errTruncated
		}
		end := p.i + j
		// Count the backslashes before the quote.
		n := 0
		for k := end - 1; k >= from && b[k] == '\\'; k-- {
			n++
		}
		p.i = end + 1
		if n%2 == 0 {
			return start, end, nil
		}
	}
}

// shortString is how many bytes of a string str looks at one by one.
const shortString = 32

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
