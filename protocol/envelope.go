package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/internal/jsonscan"
)

// Role is who an envelope speaks for.
type Role string

// The two roles an envelope may carry.
const (
	RoleUser  Role = "user"
	RoleAgent Role = "agent"
)

// Kind is the discriminator of an event (`ev.t`).
type Kind string

// The nine event kinds of the session protocol.
const (
	KindText          Kind = "text"
	KindService       Kind = "service"
	KindToolCallStart Kind = "tool-call-start"
	KindToolCallEnd   Kind = "tool-call-end"
	KindFile          Kind = "file"
	KindTurnStart     Kind = "turn-start"
	KindTurnEnd       Kind = "turn-end"
	KindStart         Kind = "start"
	KindStop          Kind = "stop"
)

// Kinds lists every event kind in a fixed order.
var Kinds = []Kind{KindText, KindService, KindToolCallStart, KindToolCallEnd, KindFile,
	KindTurnStart, KindTurnEnd, KindStart, KindStop}

// TurnStatus is how a turn ended.
type TurnStatus string

// Turn-end statuses (US spelling; "canceled" is rejected).
const (
	StatusCompleted TurnStatus = "completed"
	StatusFailed    TurnStatus = "failed"
	StatusCancelled TurnStatus = "cancelled"
)

// Valid reports whether s is one of the three statuses.
func (s TurnStatus) Valid() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// MaxResultBytes bounds the tool result preview on tool-call-end (D8).
const MaxResultBytes = 4096

// Envelope is one session-protocol message. Optional fields are omitted from
// JSON when empty, never written as null.
type Envelope struct {
	ID         string // required
	Time       int64  // required, Unix milliseconds
	Role       Role   // required
	Turn       string // optional
	Subagent   string // optional, cuid2
	ClaudeUUID string // optional: the Claude record uuid of text-bearing envelopes
	Usage      *Usage // optional
	Ev         Event  // required

	// Blob is content the relay keeps beside the envelope and gives an app
	// on demand (the full text of a tool result whose preview was cut, an
	// image's bytes), at most MaxBlobBytes. It is not part of the
	// envelope's JSON: the CLI sends it with the envelope, the relay stores
	// it under the envelope's id.
	Blob []byte
}

// Event is the payload of an envelope, discriminated by T. Only the fields of
// its kind are encoded.
type Event struct {
	T Kind

	// text, service
	Text     string
	Thinking bool          // text only
	Command  *SlashCommand // text of the user: a slash command (ccrelay)

	// service (ccrelay): what the note is about, when it is one of these.
	APIError   *APIError
	Compaction *Compaction

	// tool-call-start, tool-call-end
	Call        string
	Name        string // tool-call-start, file
	Title       string // tool-call-start; optional on start
	Description string
	Args        json.RawMessage // a JSON object
	Error       bool            // tool-call-end (D8)
	Result      *string         // tool-call-end (D8): text preview, at most MaxResultBytes
	Truncated   bool            // tool-call-end (D8): Result was cut
	Full        int64           // tool-call-end (ccrelay): bytes of the full result the relay keeps (the envelope's blob); 0: none
	Diff        *Diff           // tool-call-end (ccrelay): the file change an edit made

	// file
	Ref      string
	Size     *int64
	MimeType string
	Image    *Image

	// turn-end
	Status TurnStatus
}

// Image describes an attached image on a file event.
type Image struct {
	Width     int64  `json:"width"`
	Height    int64  `json:"height"`
	Thumbhash string `json:"thumbhash,omitempty"`
}

// Usage is the token usage of the API message an envelope came from. Unknown
// keys are kept and written back unchanged.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheCreationInputTokens *int64
	CacheReadInputTokens     *int64
	ContextWindow            *int64
	ServiceTier              string
	// Extra holds keys this version does not know, as raw JSON.
	Extra map[string]json.RawMessage
}

// Validation errors.
var (
	ErrInvalid = errors.New("invalid envelope")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks every rule of the contract: required fields, the role rules,
// the cuid2 subagent, the turn-end statuses, the usage schema and the
// per-kind required fields.
func (e *Envelope) Validate() error {
	if e.ID == "" {
		return invalid("missing id")
	}
	if !IsCuid(e.ID) {
		return invalid("id %q is not a cuid2", e.ID)
	}
	if e.Time < 0 {
		return invalid("negative time %d", e.Time)
	}
	if e.Turn != "" && !IsCuid(e.Turn) {
		return invalid("turn %q is not a cuid2", e.Turn)
	}
	if e.Role != RoleUser && e.Role != RoleAgent {
		return invalid("role %q is not user or agent", e.Role)
	}
	if e.Subagent != "" && !IsCuid(e.Subagent) {
		return invalid("subagent %q is not a cuid2", e.Subagent)
	}
	if e.Usage != nil {
		if err := e.Usage.Validate(); err != nil {
			return err
		}
	}
	ev := &e.Ev
	switch ev.T {
	case KindText:
		if ev.Command != nil {
			if e.Role != RoleUser {
				return invalid("a command must have role user")
			}
			if err := ev.Command.validate(); err != nil {
				return err
			}
		}
	case KindService, KindStart, KindStop:
		if e.Role != RoleAgent {
			return invalid("%s must have role agent", ev.T)
		}
		if ev.APIError != nil {
			if err := ev.APIError.validate(); err != nil {
				return err
			}
		}
		if ev.Compaction != nil {
			if err := ev.Compaction.validate(); err != nil {
				return err
			}
		}
	case KindToolCallStart:
		if ev.Call == "" {
			return invalid("tool-call-start without call")
		}
		if ev.Name == "" || ev.Title == "" || ev.Description == "" {
			return invalid("tool-call-start needs name, title and description")
		}
		if !isJSONObject(ev.Args) {
			return invalid("tool-call-start args must be an object")
		}
	case KindToolCallEnd:
		if ev.Call == "" {
			return invalid("tool-call-end without call")
		}
		if ev.Result != nil && len(*ev.Result) > MaxResultBytes {
			return invalid("tool-call-end result longer than %d bytes", MaxResultBytes)
		}
		if ev.Truncated && ev.Result == nil {
			return invalid("tool-call-end truncated without result")
		}
		if ev.Full < 0 || ev.Full > MaxFullResultBytes {
			return invalid("tool-call-end full %d is not within 0 to %d bytes", ev.Full, MaxFullResultBytes)
		}
		if ev.Full > 0 && !ev.Truncated {
			return invalid("tool-call-end full without truncated")
		}
		if ev.Diff != nil {
			if err := ev.Diff.validate(); err != nil {
				return err
			}
		}
	case KindFile:
		if ev.Ref == "" || ev.Name == "" {
			return invalid("file needs ref and name")
		}
		if ev.Size == nil || *ev.Size < 0 {
			return invalid("file needs a size")
		}
		if ev.Image != nil && (ev.Image.Width <= 0 || ev.Image.Height <= 0) {
			return invalid("file image needs width and height")
		}
	case KindTurnStart:
	case KindTurnEnd:
		if !ev.Status.Valid() {
			return invalid("turn-end status %q", ev.Status)
		}
	default:
		return invalid("unknown event kind %q", ev.T)
	}
	return nil
}

// Validate checks the usage schema: non-negative token counts and a positive
// context window.
func (u *Usage) Validate() error {
	if u.InputTokens < 0 || u.OutputTokens < 0 {
		return invalid("negative token count")
	}
	for _, p := range []*int64{u.CacheCreationInputTokens, u.CacheReadInputTokens} {
		if p != nil && *p < 0 {
			return invalid("negative cache token count")
		}
	}
	if u.ContextWindow != nil && *u.ContextWindow <= 0 {
		return invalid("context_window must be positive")
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	b := bytes.TrimLeft(raw, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(raw)
}

// MarshalJSON encodes the envelope with exactly the documented keys.
func (e Envelope) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil)
}

// AppendJSON appends the envelope's JSON encoding to b. The key order is
// fixed, so the same envelope always encodes to the same bytes.
func (e *Envelope) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, e.Time, 10)
	b = append(b, `,"role":`...)
	b = appendString(b, string(e.Role))
	if e.Turn != "" {
		b = append(b, `,"turn":`...)
		b = appendString(b, e.Turn)
	}
	if e.Subagent != "" {
		b = append(b, `,"subagent":`...)
		b = appendString(b, e.Subagent)
	}
	if e.ClaudeUUID != "" {
		b = append(b, `,"claudeUuid":`...)
		b = appendString(b, e.ClaudeUUID)
	}
	if e.Usage != nil {
		b = append(b, `,"usage":`...)
		b = e.Usage.appendJSON(b)
	}
	b = append(b, `,"ev":`...)
	var err error
	b, err = e.Ev.appendJSON(b)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func (ev *Event) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"t":`...)
	b = appendString(b, string(ev.T))
	switch ev.T {
	case KindText:
		b = append(b, `,"text":`...)
		b = appendString(b, ev.Text)
		if ev.Thinking {
			b = append(b, `,"thinking":true`...)
		}
		if ev.Command != nil {
			b = append(b, `,"command":`...)
			b = ev.Command.appendJSON(b)
		}
	case KindService:
		b = append(b, `,"text":`...)
		b = appendString(b, ev.Text)
		if ev.APIError != nil {
			b = append(b, `,"apiError":`...)
			b = ev.APIError.appendJSON(b)
		}
		if ev.Compaction != nil {
			b = append(b, `,"compaction":`...)
			b = ev.Compaction.appendJSON(b)
		}
	case KindToolCallStart:
		b = append(b, `,"call":`...)
		b = appendString(b, ev.Call)
		b = append(b, `,"name":`...)
		b = appendString(b, ev.Name)
		b = append(b, `,"title":`...)
		b = appendString(b, ev.Title)
		b = append(b, `,"description":`...)
		b = appendString(b, ev.Description)
		b = append(b, `,"args":`...)
		if len(ev.Args) == 0 {
			b = append(b, "{}"...)
		} else {
			var err error
			if b, err = appendRaw(b, ev.Args); err != nil {
				return nil, fmt.Errorf("tool-call-start args: %w", err)
			}
		}
	case KindToolCallEnd:
		b = append(b, `,"call":`...)
		b = appendString(b, ev.Call)
		if ev.Error {
			b = append(b, `,"error":true`...)
		}
		if ev.Result != nil {
			b = append(b, `,"result":`...)
			b = appendString(b, *ev.Result)
		}
		if ev.Truncated {
			b = append(b, `,"truncated":true`...)
		}
		if ev.Full > 0 {
			b = append(b, `,"full":`...)
			b = strconv.AppendInt(b, ev.Full, 10)
		}
		if ev.Diff != nil {
			b = append(b, `,"diff":`...)
			b = ev.Diff.appendJSON(b)
		}
	case KindFile:
		b = append(b, `,"ref":`...)
		b = appendString(b, ev.Ref)
		b = append(b, `,"name":`...)
		b = appendString(b, ev.Name)
		b = append(b, `,"size":`...)
		var size int64
		if ev.Size != nil {
			size = *ev.Size
		}
		b = strconv.AppendInt(b, size, 10)
		if ev.MimeType != "" {
			b = append(b, `,"mimeType":`...)
			b = appendString(b, ev.MimeType)
		}
		if ev.Image != nil {
			img, err := json.Marshal(ev.Image)
			if err != nil {
				return nil, err
			}
			b = append(b, `,"image":`...)
			b = append(b, img...)
		}
	case KindTurnEnd:
		b = append(b, `,"status":`...)
		b = appendString(b, string(ev.Status))
	case KindStart:
		if ev.Title != "" {
			b = append(b, `,"title":`...)
			b = appendString(b, ev.Title)
		}
	case KindTurnStart, KindStop:
	default:
		return nil, invalid("unknown event kind %q", ev.T)
	}
	return append(b, '}'), nil
}

func (u *Usage) appendJSON(b []byte) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	if u.CacheCreationInputTokens != nil {
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = strconv.AppendInt(b, *u.CacheCreationInputTokens, 10)
	}
	if u.CacheReadInputTokens != nil {
		b = append(b, `,"cache_read_input_tokens":`...)
		b = strconv.AppendInt(b, *u.CacheReadInputTokens, 10)
	}
	if u.ContextWindow != nil {
		b = append(b, `,"context_window":`...)
		b = strconv.AppendInt(b, *u.ContextWindow, 10)
	}
	if u.ServiceTier != "" {
		b = append(b, `,"service_tier":`...)
		b = appendString(b, u.ServiceTier)
	}
	if len(u.Extra) > 0 {
		keys := make([]string, 0, len(u.Extra))
		for k := range u.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b = append(b, ',')
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendRaw(b, u.Extra[k]); err != nil {
				b = append(b, "null"...)
			}
		}
	}
	return append(b, '}')
}

// MarshalJSON encodes usage with known keys first, then unknown keys sorted.
func (u Usage) MarshalJSON() ([]byte, error) { return u.appendJSON(nil), nil }

// UnmarshalJSON decodes usage strictly: input_tokens and output_tokens are
// required non-negative integers; service_tier null is accepted as absent.
func (u *Usage) UnmarshalJSON(data []byte) error {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' && jsonscan.Valid(data) {
		if ok, err := u.unmarshalScan(data); ok {
			return err
		}
	}
	m, err := usageMembers(data)
	if err != nil {
		return err
	}
	*u = Usage{}
	if u.InputTokens, err = reqInt(m, "input_tokens"); err != nil {
		return err
	}
	if u.OutputTokens, err = reqInt(m, "output_tokens"); err != nil {
		return err
	}
	if u.CacheCreationInputTokens, err = optInt(m, "cache_creation_input_tokens"); err != nil {
		return err
	}
	if u.CacheReadInputTokens, err = optInt(m, "cache_read_input_tokens"); err != nil {
		return err
	}
	if u.ContextWindow, err = optInt(m, "context_window"); err != nil {
		return err
	}
	if raw, ok := m["service_tier"]; ok {
		if !isNull(raw) {
			if err := json.Unmarshal(raw, &u.ServiceTier); err != nil {
				return invalid("service_tier is not a string")
			}
		}
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens",
		"cache_read_input_tokens", "context_window", "service_tier"} {
		delete(m, k)
	}
	if len(m) > 0 {
		u.Extra = m
	}
	return u.Validate()
}

// usageKeys are the keys of usage that Usage has fields for.
var usageKeys = [...]string{"input_tokens", "output_tokens", "cache_creation_input_tokens",
	"cache_read_input_tokens", "context_window", "service_tier"}

// unmarshalScan is UnmarshalJSON of a valid object by one scan of its
// members: the known ones are read where they are, only the others are
// copied (into Extra). ok is false when the scan does not take data.
func (u *Usage) unmarshalScan(data []byte) (ok bool, err error) {
	var known [len(usageKeys)][]byte
	var extra map[string]json.RawMessage
	if jsonscan.EachMember(data, func(k, v []byte) error {
		for i, name := range usageKeys {
			if string(k) == name {
				known[i] = v
				return nil
			}
		}
		if extra == nil {
			extra = make(map[string]json.RawMessage, 4)
		}
		extra[string(k)] = bytes.Clone(v)
		return nil
	}) != nil {
		return false, nil
	}
	*u = Usage{}
	num := func(i int) (*int64, error) {
		raw := known[i]
		if raw == nil || isNull(raw) {
			return nil, nil
		}
		f, ok := jsonNumber(raw)
		if !ok {
			return nil, invalid("usage %s is not a number", usageKeys[i])
		}
		v := int64(f)
		if float64(v) != f {
			return nil, invalid("usage %s is not an integer", usageKeys[i])
		}
		return &v, nil
	}
	for i, p := range []*int64{&u.InputTokens, &u.OutputTokens} {
		n, err := num(i)
		if err != nil {
			return true, err
		}
		if n == nil {
			return true, invalid("usage %s missing", usageKeys[i])
		}
		*p = *n
	}
	for i, p := range []**int64{&u.CacheCreationInputTokens, &u.CacheReadInputTokens, &u.ContextWindow} {
		if *p, err = num(i + 2); err != nil {
			return true, err
		}
	}
	if raw := known[5]; raw != nil && !isNull(raw) {
		s, ok := "", false
		if raw[0] == '"' {
			s, ok = jsonscan.String(raw)
		}
		if !ok {
			return true, invalid("service_tier is not a string")
		}
		u.ServiceTier = s
	}
	if len(extra) > 0 {
		u.Extra = extra
	}
	return true, u.Validate()
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

func reqInt(m map[string]json.RawMessage, key string) (int64, error) {
	p, err := optInt(m, key)
	if err != nil {
		return 0, err
	}
	if p == nil {
		return 0, invalid("usage %s missing", key)
	}
	return *p, nil
}

func optInt(m map[string]json.RawMessage, key string) (*int64, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	f, ok := jsonNumber(raw)
	if !ok {
		return nil, invalid("usage %s is not a number", key)
	}
	v := int64(f)
	if float64(v) != f {
		return nil, invalid("usage %s is not an integer", key)
	}
	return &v, nil
}

// UnmarshalJSON decodes an envelope and checks that required keys are
// present with the right types. Call Validate for the semantic rules.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	var w struct {
		ID         *string         `json:"id"`
		Time       *float64        `json:"time"`
		Role       *string         `json:"role"`
		Turn       string          `json:"turn"`
		Subagent   string          `json:"subagent"`
		ClaudeUUID string          `json:"claudeUuid"`
		Usage      *Usage          `json:"usage"`
		Ev         json.RawMessage `json:"ev"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("envelope: %w", err)
	}
	if err := exactKeys(data, envelopeKeys); err != nil {
		return err
	}
	if w.ID == nil || w.Time == nil || w.Role == nil || w.Ev == nil {
		return invalid("envelope needs id, time, role and ev")
	}
	*e = Envelope{ID: *w.ID, Time: int64(*w.Time), Role: Role(*w.Role), Turn: w.Turn,
		Subagent: w.Subagent, ClaudeUUID: w.ClaudeUUID, Usage: w.Usage}
	return e.Ev.UnmarshalJSON(w.Ev)
}

// envelopeKeys are the names of an envelope's members that its decoding
// reads through a struct.
var envelopeKeys = []string{"id", "time", "role", "turn", "subagent", "claudeUuid", "usage", "ev"}

// exactKeys refuses an object (valid JSON) with a member whose key is one
// of names up to case (or a Unicode fold, such as U+017F for s) without
// being spelt so. encoding/json takes such a key for the field, the app's
// JSON.parse does not: {"id":"a","ID":"b"} would be checked and stored
// as b and read as a, an "Ev" beside an "ev" would be checked in its
// place.
func exactKeys(obj []byte, names []string) error {
	var bad error
	_ = jsonscan.EachMember(obj, func(k, _ []byte) error {
		for _, n := range names {
			if string(k) != n && bytes.EqualFold(k, []byte(n)) {
				bad = invalid("key %q is %q spelt otherwise", Clip(string(k), 40), n)
				return bad
			}
		}
		return nil
	})
	return bad
}

// UnmarshalJSON decodes an event, requiring the fields of its kind.
func (ev *Event) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("ev: %w", err)
	}
	if m == nil {
		return invalid("ev is not an object")
	}
	*ev = Event{}
	var t string
	if err := getString(m, "t", &t, true); err != nil {
		return err
	}
	ev.T = Kind(t)
	var err error
	switch ev.T {
	case KindText:
		err = errors.Join(getString(m, "text", &ev.Text, true), getBool(m, "thinking", &ev.Thinking))
		if raw, ok := m["command"]; ok && !isNull(raw) {
			var e error
			ev.Command, e = decodeCommand(raw)
			err = errors.Join(err, e)
		}
	case KindService:
		err = getString(m, "text", &ev.Text, true)
		if raw, ok := m["apiError"]; ok && !isNull(raw) {
			var e error
			ev.APIError, e = decodeAPIError(raw)
			err = errors.Join(err, e)
		}
		if raw, ok := m["compaction"]; ok && !isNull(raw) {
			var e error
			ev.Compaction, e = decodeCompaction(raw)
			err = errors.Join(err, e)
		}
	case KindToolCallStart:
		err = errors.Join(getString(m, "call", &ev.Call, true), getString(m, "name", &ev.Name, true),
			getString(m, "title", &ev.Title, true), getString(m, "description", &ev.Description, true))
		if raw, ok := m["args"]; !ok || !isJSONObject(raw) {
			err = errors.Join(err, invalid("tool-call-start args must be an object"))
		} else {
			ev.Args = raw
		}
	case KindToolCallEnd:
		err = errors.Join(getString(m, "call", &ev.Call, true), getBool(m, "error", &ev.Error),
			getBool(m, "truncated", &ev.Truncated))
		if raw, ok := m["result"]; ok && !isNull(raw) {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				err = errors.Join(err, invalid("tool-call-end result is not a string"))
			}
			ev.Result = &s
		}
		if raw, ok := m["full"]; ok && !isNull(raw) {
			var n int64
			if json.Unmarshal(raw, &n) != nil {
				err = errors.Join(err, invalid("tool-call-end full is not an integer"))
			}
			ev.Full = n
		}
		if raw, ok := m["diff"]; ok && !isNull(raw) {
			var e error
			ev.Diff, e = decodeDiff(raw)
			err = errors.Join(err, e)
		}
	case KindFile:
		err = errors.Join(getString(m, "ref", &ev.Ref, true), getString(m, "name", &ev.Name, true),
			getString(m, "mimeType", &ev.MimeType, false))
		if raw, ok := m["size"]; ok {
			var f float64
			if json.Unmarshal(raw, &f) != nil {
				err = errors.Join(err, invalid("file size is not a number"))
			}
			n := int64(f)
			ev.Size = &n
		} else {
			err = errors.Join(err, invalid("file without size"))
		}
		if raw, ok := m["image"]; ok && !isNull(raw) {
			ev.Image = new(Image)
			if json.Unmarshal(raw, ev.Image) != nil {
				err = errors.Join(err, invalid("file image malformed"))
			}
		}
	case KindTurnEnd:
		var s string
		err = getString(m, "status", &s, true)
		ev.Status = TurnStatus(s)
	case KindStart:
		err = getString(m, "title", &ev.Title, false)
	case KindTurnStart, KindStop:
	default:
		err = invalid("unknown event kind %q", t)
	}
	return err
}

func getString(m map[string]json.RawMessage, key string, dst *string, required bool) error {
	raw, ok := m[key]
	if !ok {
		if required {
			return invalid("missing %s", key)
		}
		return nil
	}
	if str, ok := plainString(raw); ok {
		*dst = str
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil || isNull(raw) {
		return invalid("%s is not a string", key)
	}
	return nil
}

// plainString is raw, a JSON value, as the string json.Unmarshal gives when
// it is a string without escapes in valid UTF-8 (most are): decoded without
// a second scan of its bytes. ok is false for anything else.
func plainString(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

func getBool(m map[string]json.RawMessage, key string, dst *bool) error {
	raw, ok := m[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil || isNull(raw) {
		return invalid("%s is not a boolean", key)
	}
	return nil
}

// appendRaw appends raw JSON compacted and escaped exactly as encoding/json
// writes a json.RawMessage (<, >, &, U+2028 and U+2029 escaped), so an
// envelope re-encoded by any encoding/json user keeps the same bytes.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	if jsonscan.Valid(raw) {
		return appendCompactHTML(b, raw), nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return b, err
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, compact.Bytes())
	return append(b, esc.Bytes()...), nil
}

// appendString appends s as a JSON string, escaping like encoding/json
// (including <, > and & and the line separators) and replacing invalid
// UTF-8 with U+FFFD.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
