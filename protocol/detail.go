package protocol

import (
	"encoding/json"
	"strconv"
)

// Bounds of a tool-call-end diff (docs/protocol.md, "tool-call-end"). A
// diff over them is cut at a line and marked truncated: an app shows the
// hunks it got and says the rest is missing.
const (
	// MaxDiffHunks bounds the hunks of one diff.
	MaxDiffHunks = 64
	// MaxDiffLines bounds the lines of all hunks of one diff together.
	MaxDiffLines = 1000
	// MaxDiffBytes bounds the bytes of all lines of one diff together.
	MaxDiffBytes = 64 << 10
	// MaxDiffLineBytes bounds one line of a hunk; a longer line is cut on a
	// UTF-8 boundary (the diff is then marked truncated).
	MaxDiffLineBytes = 2048
	// MaxDetailBytes bounds the short strings of the details below: a
	// command's name and arguments, an API error's message, a diff's path.
	MaxDetailBytes = 4096
)

// APIError details a service envelope about a failed Messages API call
// (ccrelay): Status is the HTTP status (0 when there was none, e.g. a
// connection error), Retries how many retries Claude made in this turn so
// far. Retrying is true while Claude retries (MaxRetries and RetryInMs then
// say how many it will make and when the next one starts); a service
// envelope without it is the error that ended the turn.
type APIError struct {
	Status     int64
	Message    string
	Retries    int64
	Retrying   bool
	MaxRetries int64
	RetryInMs  int64
}

// Compaction details a service envelope about a compacted conversation
// (ccrelay): Trigger is "manual" (/compact) or "auto"; the token counts
// before and after are set when Claude recorded them.
type Compaction struct {
	Trigger    string
	PreTokens  *int64
	PostTokens *int64
}

// SlashCommand marks a user text envelope as a slash command (ccrelay): Name as
// typed ("/compact"), Args the rest of the line ("" when none). The text of
// the envelope is the command line as typed.
type SlashCommand struct {
	Name string
	Args string
}

// Diff is the change an Edit/Write/MultiEdit call made to a file
// (tool-call-end, ccrelay). Op is "create" or "update"; Hunks are unified
// diff hunks whose Lines start with ' ', '-' or '+'. Truncated is set when
// the hunks were cut to the bounds above.
type Diff struct {
	Path      string
	Op        string
	Hunks     []Hunk
	Truncated bool
}

// Hunk is one unified diff hunk, with line numbers of the old and the new
// file (1-based; a start of 0 with 0 lines for an empty side).
type Hunk struct {
	OldStart int64
	OldLines int64
	NewStart int64
	NewLines int64
	Lines    []string
}

// The diff operations.
const (
	DiffCreate = "create"
	DiffUpdate = "update"
)

func (a *APIError) validate() error {
	if a.Status < 0 || a.Retries < 0 || a.MaxRetries < 0 || a.RetryInMs < 0 {
		return invalid("apiError numbers must not be negative")
	}
	if len(a.Message) > MaxDetailBytes {
		return invalid("apiError message longer than %d bytes", MaxDetailBytes)
	}
	return nil
}

func (c *Compaction) validate() error {
	if (c.PreTokens != nil && *c.PreTokens < 0) || (c.PostTokens != nil && *c.PostTokens < 0) {
		return invalid("compaction token counts must not be negative")
	}
	if len(c.Trigger) > MaxDetailBytes {
		return invalid("compaction trigger longer than %d bytes", MaxDetailBytes)
	}
	return nil
}

func (c *SlashCommand) validate() error {
	if c.Name == "" {
		return invalid("command without name")
	}
	if len(c.Name) > MaxDetailBytes || len(c.Args) > MaxDetailBytes {
		return invalid("command name or args longer than %d bytes", MaxDetailBytes)
	}
	return nil
}

func (d *Diff) validate() error {
	if d.Op != DiffCreate && d.Op != DiffUpdate {
		return invalid("diff op %q is not create or update", d.Op)
	}
	if len(d.Path) > MaxDetailBytes {
		return invalid("diff path longer than %d bytes", MaxDetailBytes)
	}
	if len(d.Hunks) > MaxDiffHunks {
		return invalid("diff has %d hunks, more than %d", len(d.Hunks), MaxDiffHunks)
	}
	lines, size := 0, 0
	for _, h := range d.Hunks {
		if h.OldStart < 0 || h.OldLines < 0 || h.NewStart < 0 || h.NewLines < 0 {
			return invalid("diff hunk numbers must not be negative")
		}
		for _, l := range h.Lines {
			if len(l) > MaxDiffLineBytes {
				return invalid("diff line longer than %d bytes", MaxDiffLineBytes)
			}
			lines++
			size += len(l)
		}
	}
	if lines > MaxDiffLines || size > MaxDiffBytes {
		return invalid("diff has %d lines of %d bytes, more than %d lines or %d bytes", lines, size, MaxDiffLines, MaxDiffBytes)
	}
	return nil
}

func (a *APIError) appendJSON(b []byte) []byte {
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, a.Status, 10)
	b = append(b, `,"message":`...)
	b = appendString(b, a.Message)
	b = append(b, `,"retries":`...)
	b = strconv.AppendInt(b, a.Retries, 10)
	if a.Retrying {
		b = append(b, `,"retrying":true`...)
	}
	if a.MaxRetries > 0 {
		b = append(b, `,"maxRetries":`...)
		b = strconv.AppendInt(b, a.MaxRetries, 10)
	}
	if a.RetryInMs > 0 {
		b = append(b, `,"retryInMs":`...)
		b = strconv.AppendInt(b, a.RetryInMs, 10)
	}
	return append(b, '}')
}

func (c *Compaction) appendJSON(b []byte) []byte {
	b = append(b, `{"trigger":`...)
	b = appendString(b, c.Trigger)
	if c.PreTokens != nil {
		b = append(b, `,"preTokens":`...)
		b = strconv.AppendInt(b, *c.PreTokens, 10)
	}
	if c.PostTokens != nil {
		b = append(b, `,"postTokens":`...)
		b = strconv.AppendInt(b, *c.PostTokens, 10)
	}
	return append(b, '}')
}

func (c *SlashCommand) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, c.Name)
	if c.Args != "" {
		b = append(b, `,"args":`...)
		b = appendString(b, c.Args)
	}
	return append(b, '}')
}

func (d *Diff) appendJSON(b []byte) []byte {
	b = append(b, `{"path":`...)
	b = appendString(b, d.Path)
	b = append(b, `,"op":`...)
	b = appendString(b, d.Op)
	b = append(b, `,"hunks":[`...)
	for i, h := range d.Hunks {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"oldStart":`...)
		b = strconv.AppendInt(b, h.OldStart, 10)
		b = append(b, `,"oldLines":`...)
		b = strconv.AppendInt(b, h.OldLines, 10)
		b = append(b, `,"newStart":`...)
		b = strconv.AppendInt(b, h.NewStart, 10)
		b = append(b, `,"newLines":`...)
		b = strconv.AppendInt(b, h.NewLines, 10)
		b = append(b, `,"lines":[`...)
		for j, l := range h.Lines {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, l)
		}
		b = append(b, "]}"...)
	}
	b = append(b, ']')
	if d.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

// The JSON forms used when decoding.
type (
	apiErrorJSON struct {
		Status     *int64  `json:"status"`
		Message    *string `json:"message"`
		Retries    *int64  `json:"retries"`
		Retrying   bool    `json:"retrying"`
		MaxRetries int64   `json:"maxRetries"`
		RetryInMs  int64   `json:"retryInMs"`
	}
	compactionJSON struct {
		Trigger    string `json:"trigger"`
		PreTokens  *int64 `json:"preTokens"`
		PostTokens *int64 `json:"postTokens"`
	}
	slashCommandJSON struct {
		Name string `json:"name"`
		Args string `json:"args"`
	}
	hunkJSON struct {
		OldStart int64    `json:"oldStart"`
		OldLines int64    `json:"oldLines"`
		NewStart int64    `json:"newStart"`
		NewLines int64    `json:"newLines"`
		Lines    []string `json:"lines"`
	}
	diffJSON struct {
		Path      string     `json:"path"`
		Op        string     `json:"op"`
		Hunks     []hunkJSON `json:"hunks"`
		Truncated bool       `json:"truncated"`
	}
)

func decodeAPIError(raw json.RawMessage) (*APIError, error) {
	var w apiErrorJSON
	if err := json.Unmarshal(raw, &w); err != nil || w.Status == nil || w.Message == nil || w.Retries == nil {
		return nil, invalid("apiError needs status, message and retries")
	}
	return &APIError{Status: *w.Status, Message: *w.Message, Retries: *w.Retries, Retrying: w.Retrying,
		MaxRetries: w.MaxRetries, RetryInMs: w.RetryInMs}, nil
}

func decodeCompaction(raw json.RawMessage) (*Compaction, error) {
	var w compactionJSON
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, invalid("compaction malformed")
	}
	return &Compaction{Trigger: w.Trigger, PreTokens: w.PreTokens, PostTokens: w.PostTokens}, nil
}

func decodeCommand(raw json.RawMessage) (*SlashCommand, error) {
	var w slashCommandJSON
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, invalid("command malformed")
	}
	return &SlashCommand{Name: w.Name, Args: w.Args}, nil
}

func decodeDiff(raw json.RawMessage) (*Diff, error) {
	var w diffJSON
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, invalid("diff malformed")
	}
	d := &Diff{Path: w.Path, Op: w.Op, Truncated: w.Truncated}
	for _, h := range w.Hunks {
		d.Hunks = append(d.Hunks, Hunk(h))
	}
	return d, nil
}
