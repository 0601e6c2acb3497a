package claude

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ccrelay/ccrelay/internal/jsonscan"
)

// ParseLine reads one transcript line as a replay needs it, in one pass
// over its bytes: a record that is not conversation comes back with its
// Type alone (D14) and keeps nothing of line; a conversation record is
// parsed from a copy of line (Raw), so line may be reused. It gives what
// PeekType followed, for conversation records, by Parse of a copy gives,
// errors included.
func ParseLine(line []byte) (*Record, error) { return parseLine(line, nil, nil) }

// ParseLineLink is ParseLine that also returns, for a line that is not
// conversation, its uuid and parentUuid where PeekTypeLink finds them, as
// the JSON values in line (nil: none), for Lineage.AddRaw; a conversation
// record has its own.
func ParseLineLink(line []byte) (r *Record, uuid, parent []byte, err error) {
	var l link
	r, err = parseLine(line, nil, &l)
	return r, l.uuid, l.parent, err
}

// A LineParser reads the lines of one transcript as ParseLine and
// ParseLineLink do, and makes once the strings its records repeat: the
// session id, the model, a message id over the lines of its blocks, a uuid
// as the next record's parent. A record that is not conversation (its Type
// alone) is made once per type and shared by the lines of that type: it
// must not be changed. The zero value is ready to use.
type LineParser struct{ c strCache }

// ParseLine is ParseLine with the strings of the lines before.
func (lp *LineParser) ParseLine(line []byte) (*Record, error) { return parseLine(line, &lp.c, nil) }

// ParseLineLink is ParseLineLink with the strings of the lines before.
func (lp *LineParser) ParseLineLink(line []byte) (r *Record, uuid, parent []byte, err error) {
	var l link
	r, err = parseLine(line, &lp.c, &l)
	return r, l.uuid, l.parent, err
}

func parseLine(line []byte, c *strCache, l *link) (*Record, error) {
	r, err := parseRecord(line, true, c, l)
	if err != nil && r != nil {
		// A conversation record that did not parse: r holds its copy.
		if rest := tornTail(r.Raw); rest != nil {
			if r2, err2 := parse(rest); err2 == nil && IsConversationType(r2.Type) {
				return r2, nil
			}
		}
		return nil, err
	}
	return r, err
}

// strCache holds the last strings made of id-like values, and the records
// made for types that are not conversation (a few per transcript).
type strCache struct {
	s      [8]string
	next   int
	others []*Record
}

// other is a record of type typ alone (not conversation): the one made for
// an earlier line of that type when there is one.
func (c *strCache) other(typ string) *Record {
	if c == nil {
		return &Record{Type: typ}
	}
	for _, r := range c.others {
		if r.Type == typ {
			return r
		}
	}
	r := &Record{Type: typ}
	if len(c.others) < 8 {
		c.others = append(c.others, r)
	}
	return r
}

// cached is jsonStr of v, a string of the cache when one equals it.
func (p *peeker) cached(v []byte) string {
	c := p.c
	if c == nil || len(v) < 2 || v[0] != '"' {
		return jsonStr(v)
	}
	in := v[1 : len(v)-1]
	for _, s := range c.s {
		if len(s) == len(in) && s == string(in) {
			// s was made of the same bytes (see below), so it is what
			// they decode to.
			return s
		}
	}
	s := jsonStr(v)
	if len(s) > 0 && len(s) <= 128 && s == string(in) {
		// Only a value that is its own text: no escape, valid UTF-8,
		// no control character.
		c.s[c.next] = s
		c.next = (c.next + 1) % len(c.s)
	}
	return s
}

// parse decodes one line (see Parse), which the record keeps.
func parse(line []byte) (*Record, error) {
	r, err := parseRecord(line, false, nil, nil)
	if err != nil {
		return nil, err
	}
	if !IsConversationType(r.Type) {
		r.Raw = line
	}
	return r, nil
}

// pending is a member of the record met before its type: its key and where
// its value starts.
type pending struct {
	key []byte
	vs  int
}

// parseRecord walks the members of the record's object once. Until the
// type is known it only notes where the values are; a type that is not
// conversation ends the walk (the line is only checked to end like an
// object, as PeekType does). With copyLine, a conversation record is parsed
// from a copy of line made at its type. On an error after a conversation
// type it returns the record so far (its Raw the line or its copy) with
// the error, for the torn-line check.
func parseRecord(line []byte, copyLine bool, c *strCache, l *link) (*Record, error) {
	line = bytes.TrimRight(line, "\r\n")
	t := bytes.TrimLeft(line, " \t\r\n")
	if len(t) == 0 {
		return nil, errors.New("empty line")
	}
	if t[0] != '{' {
		if jsonscan.Valid(line) {
			return nil, ErrNotObject
		}
		return nil, errors.New("invalid JSON")
	}
	p := peeker{b: line, i: len(line) - len(t) + 1, c: c}
	var (
		before [16]pending
		early  = before[:0]
		rp     recordParser
		r      *Record
	)
	for first := true; ; {
		more, err := p.more('}', &first)
		if err == nil && more {
			var k []byte
			if k, err = p.key(); err == nil {
				switch {
				case r != nil:
					err = rp.member(k, &p)
				case string(k) == "type":
					var v []byte
					if v, err = p.value(false); err != nil {
						return nil, err
					}
					typ := recordType(v)
					// The type is known: the rest of the line is only
					// checked to end like an object, so a truncated line is
					// still reported.
					if !bytes.HasSuffix(bytes.TrimRight(t, " \t\r\n"), []byte("}")) {
						return nil, errTruncated
					}
					if !IsConversationType(typ) {
						if l != nil {
							l.find(line, t, early, p.i)
						}
						return c.other(typ), nil
					}
					if copyLine {
						p.b = bytes.Clone(line)
					}
					r = &Record{Type: typ, Raw: p.b}
					rp.r = r
					for _, e := range early {
						sub := peeker{b: p.b, i: e.vs, c: p.c}
						if err = rp.member(e.key, &sub); err != nil {
							break
						}
					}
				default:
					vs := p.i
					if _, err = p.value(false); err == nil {
						early = append(early, pending{k, vs})
					}
				}
			}
		}
		if err != nil {
			if r == nil {
				return nil, err
			}
			return r, fmt.Errorf("decode %s record: %w", r.Type, err)
		}
		if !more {
			break
		}
	}
	if r == nil {
		// No type: not a conversation record.
		return &Record{}, nil
	}
	rp.finish()
	return r, nil
}

// link is the place in the parent chain of a line that is not
// conversation (ParseLineLink): JSON values in the line.
type link struct{ uuid, parent []byte }

// find reads it: parentUuid among the members before the type (early,
// values in line), where Claude writes it (without it there, the line is
// not in the chain), the uuid there too, or among the members after the
// type (from line[after], where its value ends): first among the last
// bytes of t (the object, trimmed), where Claude writes it after a large
// value (progress data), then in the members from the type on (Claude
// Code 2.1.330 writes it right after the type, behind a large attachment).
// Nothing is read twice and no string is made.
func (l *link) find(line, t []byte, early []pending, after int) {
	hasParent := false
	for _, e := range early {
		switch string(e.key) {
		case "parentUuid", "uuid":
			sub := peeker{b: line, i: e.vs}
			v, err := sub.value(false)
			if err != nil {
				*l = link{}
				return
			}
			if string(e.key) == "uuid" {
				l.uuid = v
			} else {
				hasParent, l.parent = true, v
			}
		}
	}
	if !hasParent {
		*l = link{}
		return
	}
	if len(l.uuid) == 0 {
		if u, ok := nextUUID(line, after, 1); ok {
			l.uuid = u
		} else if u, ok := tailUUID(bytes.TrimRight(t, " \t\r\n")); ok {
			l.uuid = u
		} else if u, ok := nextUUID(line, after, -1); ok {
			l.uuid = u
		}
	}
	if hashRaw(l.uuid) == 0 {
		*l = link{}
	}
}

// nextUUID reads the members of the object in line from i, the end of a
// member's value, to its closing brace, at most n of them (n < 0: all),
// and returns the value of the first uuid member (a JSON string).
func nextUUID(line []byte, i, n int) ([]byte, bool) {
	p := peeker{b: line, i: i}
	for first := false; n != 0; n-- {
		more, err := p.more('}', &first)
		if err != nil || !more {
			return nil, false
		}
		k, err := p.key()
		if err != nil {
			return nil, false
		}
		v, err := p.value(false)
		if err != nil {
			return nil, false
		}
		if string(k) == "uuid" {
			return v, v[0] == '"'
		}
	}
	return nil, false
}

// recordType is the type of a record, the string constants for the
// frequent ones.
func recordType(v []byte) string {
	switch string(v) {
	case `"user"`:
		return TypeUser
	case `"assistant"`:
		return TypeAssistant
	case `"system"`:
		return TypeSystem
	case `"summary"`:
		return TypeSummary
	case `"progress"`:
		return "progress"
	case `"attachment"`:
		return "attachment"
	case `"file-history-snapshot"`:
		return "file-history-snapshot"
	case `"queue-operation"`:
		return "queue-operation"
	}
	return jsonStr(v)
}

// recordParser reads the members of a conversation record.
type recordParser struct {
	r                                           *Record
	parentAlt, sessionAlt, agentAlt, toolUseAlt string
	toolUseResultAlt                            []byte
	retry                                       APIRetry
	compact                                     []byte
	apiErrorFlag, errorString                   bool
	version                                     []byte // decoded only when used
}

// member reads the member k, whose value is at p.i, and moves p past it.
func (rp *recordParser) member(k []byte, p *peeker) error {
	r := rp.r
	if string(k) == "message" {
		if p.i < len(p.b) && p.b[p.i] == '{' {
			m, err := messageAt(p, false)
			if err != nil {
				return err
			}
			r.Message = m
			return nil
		}
		_, err := p.value(false)
		return err
	}
	v, err := p.value(false)
	if err != nil {
		return err
	}
	switch string(k) {
	case "subtype":
		r.Subtype = jsonStr(v)
	case "uuid":
		r.UUID = p.cached(v)
	case "parentUuid":
		r.ParentUUID = p.cached(v)
	case "parentUUID":
		rp.parentAlt = p.cached(v)
	case "sessionId":
		r.SessionID = p.cached(v)
	case "session_id":
		rp.sessionAlt = p.cached(v)
	case "agentId":
		r.AgentID = p.cached(v)
	case "agent_id":
		rp.agentAlt = p.cached(v)
	case "parent_tool_use_id":
		r.ParentToolUseID = p.cached(v)
	case "parentToolUseId":
		rp.toolUseAlt = p.cached(v)
	case "timestamp":
		r.Timestamp = parseTime(v)
	case "isSidechain":
		r.IsSidechain = string(v) == "true"
	case "isMeta", "isSynthetic":
		r.IsMeta = r.IsMeta || truthy(v)
	case "isCompactSummary":
		r.IsCompactSummary = truthy(v)
	case "isApiErrorMessage", "is_api_error_message":
		rp.apiErrorFlag = true
		r.IsAPIError = r.IsAPIError || truthy(v)
	case "apiErrorStatus", "api_error_status", "error_status":
		r.APIErrorStatus = jsonInt(v)
	case "version":
		rp.version = v
	case "retryAttempt", "attempt":
		rp.retry.Attempt = jsonInt(v)
	case "maxRetries", "max_retries":
		rp.retry.MaxRetries = jsonInt(v)
	case "retryInMs", "retry_delay_ms":
		rp.retry.RetryInMs = jsonInt(v)
	case "error":
		rp.errorString = len(v) > 2 && v[0] == '"'
		if r.Type == TypeSystem && len(v) > 0 && v[0] == '{' {
			_ = eachKey(v, func(k, v []byte) error {
				if string(k) == "status" {
					rp.retry.Status = jsonInt(v)
				}
				return nil
			})
		}
	case "compactMetadata", "compact_metadata":
		rp.compact = v
	case "origin":
		if len(v) > 0 && v[0] == '{' {
			_ = eachKey(v, func(k, v []byte) error {
				if string(k) == "kind" {
					r.OriginKind = jsonStr(v)
				}
				return nil
			})
		}
	case "toolUseResult":
		r.ToolUseResult = v
	case "tool_use_result":
		rp.toolUseResultAlt = v
	case "summary":
		r.Summary = jsonStr(v)
	case "leafUuid":
		r.LeafUUID = p.cached(v)
	}
	return nil
}

// finish settles what depends on several members.
func (rp *recordParser) finish() {
	r := rp.r
	if r.ParentUUID == "" {
		r.ParentUUID = rp.parentAlt
	}
	if r.SessionID == "" {
		r.SessionID = rp.sessionAlt
	}
	if r.AgentID == "" {
		r.AgentID = rp.agentAlt
	}
	if r.ParentToolUseID == "" {
		r.ParentToolUseID = rp.toolUseAlt
	}
	if r.ToolUseResult == nil {
		r.ToolUseResult = rp.toolUseResultAlt
	}
	if r.Type == TypeAssistant && !rp.apiErrorFlag && rp.errorString && r.Message != nil && r.Message.Model == SyntheticModel {
		// Older versions (2.1.197) print the API error message on
		// stream-json without is_api_error_message, with error set.
		r.IsAPIError = true
	}
	if r.Type == TypeSystem {
		switch r.Subtype {
		case SubtypeAPIError, SubtypeAPIRetry:
			retry := rp.retry
			if retry.Status == 0 {
				retry.Status = r.APIErrorStatus
			}
			if retry.Attempt > 0 {
				retry.Late = r.Subtype == SubtypeAPIError && RetriesWrittenLate(jsonStr(rp.version))
				r.Retry = &retry
			}
		case SubtypeCompactBoundary:
			r.Compact = parseCompact(rp.compact)
		}
	}
}

// The values inside a record (its message, the message's content, the
// content's blocks) are read where they are, in the walk of the record
// (strict), and only where that fails as the bytes of the value alone,
// which the walk of the value around them skipped as a whole. The two
// agree: a skip ends where a strict walk does, since both find strings
// and brackets alike, and a strict walk refuses a bare token holding a
// quote or a bracket, which a walk takes for a token but a skip counts.

// errLooseToken is a bare token with a quote or bracket in a strict walk.
var errLooseToken = errors.New("invalid JSON: unexpected character in a literal")

// messageAt reads the message object at p.i; strict is the walk p is in.
// It fails only where the value cannot be skipped.
func messageAt(p *peeker, strict bool) (*Message, error) {
	vs := p.i
	if m, err := walkMessage(p, true); err == nil {
		return m, nil
	}
	p.i = vs
	v, err := p.value(strict)
	if err != nil {
		return nil, err
	}
	if v[0] != '{' {
		return nil, nil
	}
	m, err := walkMessage(&peeker{b: v, c: p.c}, false)
	if err != nil {
		return nil, nil
	}
	return m, nil
}

func walkMessage(p *peeker, strict bool) (*Message, error) {
	if err := p.enter('{'); err != nil {
		return nil, err
	}
	m := &Message{}
	for first := true; ; {
		more, err := p.more('}', &first)
		if err != nil {
			return nil, err
		}
		if !more {
			return m, nil
		}
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		if string(k) == "content" {
			if m.Content, err = contentAt(p, strict); err != nil {
				return nil, err
			}
			continue
		}
		v, err := p.value(strict)
		if err != nil {
			return nil, err
		}
		switch string(k) {
		case "id":
			m.ID = p.cached(v)
		case "role":
			m.Role = role(v)
		case "model":
			m.Model = p.cached(v)
		case "usage":
			if v[0] == '{' {
				m.Usage = v
			}
		}
	}
}

func role(v []byte) string {
	switch string(v) {
	case `"user"`:
		return "user"
	case `"assistant"`:
		return "assistant"
	}
	return jsonStr(v)
}

// contentAt reads a message's content at p.i.
func contentAt(p *peeker, strict bool) (Content, error) {
	vs := p.i
	if p.i < len(p.b) && p.b[p.i] == '[' {
		if blocks, err := walkBlocks(p, true); err == nil {
			return Content{Raw: p.b[vs:p.i], Present: true, Blocks: blocks}, nil
		}
		p.i = vs
	}
	v, err := p.value(strict)
	if err != nil {
		return Content{}, err
	}
	c := Content{Raw: v}
	switch v[0] {
	case '"':
		if s, ok := unquote(v); ok {
			c.Present, c.IsString, c.String = true, true, s
		}
	case '[':
		if blocks, err := walkBlocks(&peeker{b: v, c: p.c}, false); err == nil {
			c.Present, c.Blocks = true, blocks
		}
	}
	return c, nil
}

func walkBlocks(p *peeker, strict bool) ([]Block, error) {
	if err := p.enter('['); err != nil {
		return nil, err
	}
	blocks := make([]Block, 0, 2)
	for first := true; ; {
		more, err := p.more(']', &first)
		if err != nil {
			return nil, err
		}
		if !more {
			return blocks, nil
		}
		b, err := blockAt(p, strict)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
}

// blockAt reads the content block at p.i.
func blockAt(p *peeker, strict bool) (Block, error) {
	vs := p.i
	if p.i < len(p.b) && p.b[p.i] == '{' {
		var b Block
		if walkBlock(p, &b, true) == nil {
			return b, nil
		}
		p.i = vs
	}
	v, err := p.value(strict)
	if err != nil {
		return Block{}, err
	}
	var b Block
	if v[0] != '{' || walkBlock(&peeker{b: v, c: p.c}, &b, false) != nil {
		return Block{Type: "invalid"}, nil
	}
	return b, nil
}

func walkBlock(p *peeker, b *Block, strict bool) error {
	if err := p.enter('{'); err != nil {
		return err
	}
	for first := true; ; {
		more, err := p.more('}', &first)
		if err != nil || !more {
			return err
		}
		k, err := p.key()
		if err != nil {
			return err
		}
		v, err := p.value(strict)
		if err != nil {
			return err
		}
		switch string(k) {
		case "type":
			b.Type = blockType(v)
		case "text":
			if s, ok := unquote(v); ok {
				b.Text = &s
			}
		case "thinking":
			if s, ok := unquote(v); ok {
				b.Thinking = &s
			}
		case "id":
			b.ID = p.cached(v)
		case "name":
			b.Name = p.cached(v)
		case "input":
			b.Input = v
		case "tool_use_id":
			b.ToolUseID = p.cached(v)
		case "content":
			b.Content = v
		case "is_error":
			b.IsError = string(v) == "true"
		case "source":
			b.Source = parseSource(v)
		}
	}
}

// blockType is a block's type, the string constants for the usual ones.
func blockType(v []byte) string {
	switch string(v) {
	case `"text"`:
		return "text"
	case `"tool_use"`:
		return "tool_use"
	case `"tool_result"`:
		return "tool_result"
	case `"thinking"`:
		return "thinking"
	case `"image"`:
		return "image"
	}
	return jsonStr(v)
}

// enter consumes the opening bracket of the value at p.i.
func (p *peeker) enter(open byte) error {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != open {
		return fmt.Errorf("invalid JSON: expected %q", open)
	}
	p.i++
	return nil
}

// more moves to the next member of the object or array walked, after the
// comma before it; at the closing bracket it consumes it and reports false.
func (p *peeker) more(close byte, first *bool) (bool, error) {
	p.ws()
	if p.i >= len(p.b) {
		return false, errTruncated
	}
	if p.b[p.i] == close {
		p.i++
		return false, nil
	}
	if !*first {
		if p.b[p.i] != ',' {
			return false, fmt.Errorf("invalid JSON: expected ',' or %q", close)
		}
		p.i++
		p.ws()
	}
	*first = false
	return true, nil
}

// value consumes the value at p.i and returns its bytes; strict refuses a
// bare token with a quote or a bracket in it.
func (p *peeker) value(strict bool) ([]byte, error) {
	vs := p.i
	if err := p.skipValue(); err != nil {
		return nil, err
	}
	if p.i == vs {
		return nil, errors.New("invalid JSON: unexpected character")
	}
	v := p.b[vs:p.i]
	if strict {
		switch v[0] {
		case '"', '{', '[':
		default:
			if bytes.ContainsAny(v, `"{[`) {
				return nil, errLooseToken
			}
		}
	}
	return v, nil
}
