package mapper

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/jsonscan"
	"github.com/ccrelay/ccrelay/protocol"
)

// apiError maps the message Claude writes when an API call failed for good
// (D18): a service envelope with the status, the message and the retries
// made so far in the turn, then the turn ends failed. In a subagent only
// the subagent failed: the note goes under it and the turn goes on.
func (m *Mapper) apiError(r *claude.Record, sub *subagent) {
	src := source(r)
	m.ensureTurn(r)
	m.ensureStarted(sub, src)
	text := strings.TrimSpace(userText(r))
	status := r.APIErrorStatus
	msg := strings.TrimSpace(strings.TrimPrefix(text, "API Error:"))
	if n, rest, ok := strings.Cut(msg, " "); ok && n == strconv.FormatInt(status, 10) {
		msg = strings.TrimSpace(rest)
	} else if status == 0 {
		if v, err := strconv.ParseInt(n, 10, 64); err == nil && v >= 100 && v < 600 {
			status, msg = v, strings.TrimSpace(rest)
		}
	}
	if text == "" {
		text = "API error"
	}
	msg, _ = Preview(msg, protocol.MaxDetailBytes)
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, src, "api-error"), sub, r.UUID,
		protocol.Event{T: protocol.KindService, Text: text,
			APIError: &protocol.APIError{Status: status, Message: msg, Retries: m.retries}})
	if sub == nil && !r.IsSidechain && r.ParentToolUseID == "" {
		m.closeTurn(protocol.StatusFailed)
	}
}

// apiRetry maps a retry of a failed API call (D18). Transcripts and
// stream-json give the retry different uuids, so its ids come from the turn
// and the retry's number in it; a turn a retry opens takes its id from the
// prompt before it.
func (m *Mapper) apiRetry(r *claude.Record, sub *subagent) {
	if m.turn == "" {
		src := source(r)
		if m.lastPrompt != "" {
			// Once per prompt: a later turn a retry opens (after a
			// turn_duration, say) falls back to the record.
			src = m.derive("retry-after:"+m.lastPrompt, src)
		}
		m.turn = protocol.DeriveID(m.session, "turn", src)
		m.stats.Turns++
		m.emit(protocol.RoleAgent, protocol.DeriveID(m.session, "turn-start", m.turn), nil, "",
			protocol.Event{T: protocol.KindTurnStart})
	}
	m.retries++
	n := strconv.FormatInt(m.retries, 10)
	m.ensureStarted(sub, "retry:"+m.turn+":"+n)
	rt := r.Retry
	what := "API error " + strconv.FormatInt(rt.Status, 10)
	if rt.Status == 0 {
		what = "API connection error"
	}
	word := statusText(rt.Status)
	text := what + " (" + word + "), retrying: attempt " + strconv.FormatInt(rt.Attempt, 10)
	if rt.MaxRetries > 0 {
		text += " of " + strconv.FormatInt(rt.MaxRetries, 10)
	}
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, m.turn, "api-retry", n), sub, "",
		protocol.Event{T: protocol.KindService, Text: text, APIError: &protocol.APIError{
			Status: rt.Status, Message: word, Retries: m.retries, Retrying: true,
			MaxRetries: rt.MaxRetries, RetryInMs: rt.RetryInMs}})
}

// statusText names an HTTP status of the Messages API in a few words.
func statusText(status int64) string {
	switch {
	case status == 0:
		return "no response"
	case status == 529:
		return "overloaded"
	case status == 429:
		return "rate limited"
	case status == 408:
		return "request timeout"
	case status == 401 || status == 403:
		return "not authorised"
	case status >= 500:
		return "server error"
	}
	return "request error"
}

// compacted maps a compaction boundary (D19): a service envelope saying the
// conversation was compacted, with the token counts Claude recorded.
//
// A manual compaction (/compact) runs between turns: Claude took the
// command once the turn before it had ended, and writes the boundary
// before the command's own record. The turn still open here is that
// finished turn (a transcript records no turn's end, only the next
// prompt): it is closed, and the note opens a turn of its own, as it
// does live, where the turn had ended before the command was written.
func (m *Mapper) compacted(r *claude.Record, sub *subagent) {
	src := source(r)
	c := r.Compact
	if c.Trigger == "manual" && sub == nil {
		m.closeTurn(protocol.StatusCompleted)
	}
	m.ensureTurn(r)
	m.ensureStarted(sub, src)
	text := "Conversation compacted"
	switch {
	case c.PreTokens != nil && c.PostTokens != nil:
		text += " (" + strconv.FormatInt(*c.PreTokens, 10) + " tokens before, " + strconv.FormatInt(*c.PostTokens, 10) + " after)"
	case c.PreTokens != nil:
		text += " (" + strconv.FormatInt(*c.PreTokens, 10) + " tokens before)"
	}
	trigger, _ := Preview(c.Trigger, protocol.MaxDetailBytes)
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, src, "compacted"), sub, "",
		protocol.Event{T: protocol.KindService, Text: text, Compaction: &protocol.Compaction{
			Trigger: trigger, PreTokens: c.PreTokens, PostTokens: c.PostTokens}})
}

// slashCommand returns the command a user record holds as Claude's
// <command-name> markup (D19), or nil.
func slashCommand(r *claude.Record) *protocol.SlashCommand {
	t := userText(r)
	if !strings.Contains(t, "<command-name>") {
		return nil
	}
	name := claude.Markup(t, "command-name")
	if name == "" {
		return nil
	}
	name, _ = Preview(name, protocol.MaxDetailBytes)
	args, _ := Preview(claude.Markup(t, "command-args"), protocol.MaxDetailBytes)
	return &protocol.SlashCommand{Name: name, Args: args}
}

// command maps a slash command the user typed: their prompt, shown as the
// command line with the command marked, never as markup.
func (m *Mapper) command(r *claude.Record, src string, cmd *protocol.SlashCommand) {
	m.closeTurn(protocol.StatusCompleted)
	idx := -1
	if c := &r.Message.Content; !c.IsString {
		for i := range c.Blocks {
			if c.Blocks[i].Type == "text" {
				idx = i
				break
			}
		}
	}
	text := cmd.Name
	if cmd.Args != "" {
		text += " " + cmd.Args
	}
	m.lastPrompt = src
	m.emitOwn(protocol.RoleUser, blockID(m.session, src, idx, "text"), nil, r.UUID,
		protocol.Event{T: protocol.KindText, Text: text, Command: cmd})
}

var structuredPatchKey = []byte(`"structuredPatch"`)

// hunkJSON is one hunk of a structuredPatch.
type hunkJSON struct {
	OldStart int64    `json:"oldStart"`
	OldLines int64    `json:"oldLines"`
	NewStart int64    `json:"newStart"`
	NewLines int64    `json:"newLines"`
	Lines    []string `json:"lines"`
}

// decodePatch decodes a structuredPatch as json.Unmarshal into []hunkJSON
// does, by a scan; what the scan leaves (a value of another type, a key
// that is not ASCII) goes to json.Unmarshal. ok is false when that fails.
func decodePatch(raw []byte) ([]hunkJSON, bool) {
	if patch, ok := scanPatch(raw); ok {
		return patch, true
	}
	var patch []hunkJSON
	return patch, json.Unmarshal(raw, &patch) == nil
}

var errScan = errors.New("left to a full decode")

func scanPatch(raw []byte) ([]hunkJSON, bool) {
	if len(raw) == 0 || raw[0] != '[' || !jsonscan.Valid(raw) {
		return nil, false
	}
	patch := []hunkJSON{}
	err := jsonscan.EachElem(raw, func(v []byte) error {
		var h hunkJSON
		if v[0] != '{' {
			return errScan
		}
		err := jsonscan.EachMember(v, func(k, v []byte) error {
			for _, c := range k {
				if c >= utf8.RuneSelf {
					return errScan
				}
			}
			var dst *int64
			switch strings.ToLower(string(k)) {
			case "oldstart":
				dst = &h.OldStart
			case "oldlines":
				dst = &h.OldLines
			case "newstart":
				dst = &h.NewStart
			case "newlines":
				dst = &h.NewLines
			case "lines":
				if string(v) == "null" {
					h.Lines = nil
					return nil
				}
				if v[0] != '[' {
					return errScan
				}
				h.Lines = h.Lines[:0]
				if h.Lines == nil {
					h.Lines = []string{}
				}
				return jsonscan.EachElem(v, func(v []byte) error {
					s, ok := jsonscan.String(v)
					if !ok {
						return errScan
					}
					h.Lines = append(h.Lines, s)
					return nil
				})
			default:
				return nil
			}
			if string(v) == "null" {
				return nil
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return errScan
			}
			*dst = n
			return nil
		})
		if err != nil {
			return err
		}
		patch = append(patch, h)
		return nil
	})
	return patch, err == nil
}

// diffOf is the bounded diff of a file edit's result (D20), nil when the
// record's toolUseResult is not one.
func diffOf(r *claude.Record) *protocol.Diff {
	raw := r.ToolUseResult
	if len(raw) == 0 || raw[0] != '{' || !bytes.Contains(raw, structuredPatchKey) {
		return nil
	}
	fe, ok := claude.ParseFileEdit(raw)
	if !ok {
		return nil
	}
	patch, ok := decodePatch(fe.Patch)
	if !ok {
		return nil
	}
	path, cut := Preview(fe.FilePath, protocol.MaxDetailBytes)
	d := &protocol.Diff{Path: path, Op: protocol.DiffUpdate, Truncated: cut}
	if fe.Type == protocol.DiffCreate {
		d.Op = protocol.DiffCreate
	}
	var b diffBounds
	for _, h := range patch {
		if !b.hunk(d, protocol.Hunk{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines}, h.Lines) {
			break
		}
	}
	if d.Op == protocol.DiffCreate && len(patch) == 0 && fe.Content != nil && *fe.Content != "" {
		// A created file has no patch: the whole file is the hunk.
		lines := strings.Split(strings.TrimSuffix(*fe.Content, "\n"), "\n")
		plus := make([]string, len(lines))
		for i, l := range lines {
			plus[i] = "+" + l
		}
		b.hunk(d, protocol.Hunk{NewStart: 1, NewLines: int64(len(lines))}, plus)
	}
	return d
}

// diffBounds keeps a diff within protocol.MaxDiffHunks, MaxDiffLines and
// MaxDiffBytes, cutting long lines to MaxDiffLineBytes.
type diffBounds struct{ lines, bytes int }

// hunk appends h with as many of lines as fit and reports whether more
// may follow.
func (b *diffBounds) hunk(d *protocol.Diff, h protocol.Hunk, lines []string) bool {
	if len(d.Hunks) >= protocol.MaxDiffHunks {
		d.Truncated = true
		return false
	}
	h.Lines = make([]string, 0, min(len(lines), protocol.MaxDiffLines-b.lines))
	for _, l := range lines {
		l, cut := Preview(l, protocol.MaxDiffLineBytes)
		if b.lines >= protocol.MaxDiffLines || b.bytes+len(l) > protocol.MaxDiffBytes {
			d.Truncated = true
			if len(h.Lines) > 0 {
				d.Hunks = append(d.Hunks, h)
			}
			return false
		}
		d.Truncated = d.Truncated || cut
		h.Lines = append(h.Lines, l)
		b.lines++
		b.bytes += len(l)
	}
	d.Hunks = append(d.Hunks, h)
	return true
}

// rateLimited shows a change of the account's rate limit (remote mode:
// stream-json's rate_limit_event): a warning or a refusal, and the return
// to normal after one; an "allowed" that changes nothing is not shown.
func (m *Mapper) rateLimited(r *claude.Record, sub *subagent) {
	rl := r.RateLimit
	if rl.Status == m.rateLimit || (m.rateLimit == "" && rl.Status == "allowed") {
		m.rateLimit = rl.Status
		return
	}
	m.rateLimit = rl.Status
	src := source(r)
	m.ensureTurn(r)
	m.ensureStarted(sub, src)
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, src, "rate-limit"), sub, "",
		protocol.Event{T: protocol.KindService, Text: RateLimitText(rl)})
}

// RateLimitText says a rate limit change in words.
func RateLimitText(rl *claude.RateLimitInfo) string {
	window := map[string]string{"five_hour": "5-hour", "seven_day": "weekly", "seven_day_opus": "weekly Opus",
		"seven_day_sonnet": "weekly Sonnet", "seven_day_overage_included": "weekly", "overage": "extra usage"}[rl.RateLimitType]
	limit := "usage limit"
	if window != "" {
		limit = window + " usage limit"
	}
	resets := ""
	if rl.ResetsAt > 0 {
		resets = " (resets " + time.Unix(rl.ResetsAt, 0).UTC().Format("Jan 2 15:04 UTC") + ")"
	}
	switch rl.Status {
	case "rejected":
		return "Rate limited: the " + limit + " is reached" + resets
	case "allowed_warning":
		used := ""
		if rl.Utilization != nil {
			used = " " + strconv.Itoa(int(*rl.Utilization*100+0.5)) + "% of the"
		}
		return "Rate limit warning:" + cmpOr(used, " close to the") + " " + limit + " used" + resets
	case "allowed":
		return "Rate limit: back to normal"
	}
	s, _ := Preview(rl.Status, 64)
	return "Rate limit: " + s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// conversationReset shows where Claude discarded the conversation (/clear,
// leaving plan mode with a clear context, …): what follows starts afresh.
func (m *Mapper) conversationReset(r *claude.Record, sub *subagent) {
	src := source(r)
	m.ensureTurn(r)
	m.ensureStarted(sub, src)
	why := map[string]string{"clear": " (/clear)", "plan_mode_exit": " (leaving plan mode)", "fresh_session": " (a fresh session for the plan)",
		"onboarding": " (onboarding)"}[r.Reset.Trigger]
	m.emitOwn(protocol.RoleAgent, protocol.DeriveID(m.session, src, "reset"), sub, "",
		protocol.Event{T: protocol.KindService, Text: "Conversation cleared" + why + ": Claude starts afresh from here"})
}
