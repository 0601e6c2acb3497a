package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The record parser as it was before the one-pass scan (parse.go): a walk of
// the line for the type, then a walk of every value's bytes on its own. It
// is the reference the fuzz targets hold ParseLine and Parse to.

// refParseLine is what replay read a line as: the type alone for records
// that are not conversation, the record parsed from a copy for the others.
func refParseLine(line []byte) (*Record, error) {
	typ, err := PeekType(line)
	if err != nil {
		return nil, err
	}
	if !IsConversationType(typ) {
		return &Record{Type: typ}, nil
	}
	return refParseTorn(append([]byte(nil), line...))
}

// refParseTorn is Parse with the reference parser.
func refParseTorn(line []byte) (*Record, error) {
	line = bytes.TrimRight(line, "\r\n")
	r, err := refParse(line)
	if err != nil || (!IsConversationType(r.Type) && mayHoldRecordStart(line) && !json.Valid(line)) {
		if rest := tornTail(line); rest != nil {
			if r2, err2 := refParse(rest); err2 == nil && IsConversationType(r2.Type) {
				return r2, nil
			}
		}
	}
	return r, err
}

func refParse(line []byte) (*Record, error) {
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
				r.Message = refParseMessage(v)
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

func refParseMessage(v []byte) *Message {
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
			m.Content = refParseContent(v)
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

func refParseContent(raw []byte) Content {
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
			c.Blocks = append(c.Blocks, refParseBlock(it))
			return nil
		}) != nil {
			c.Present, c.Blocks = false, nil
		}
	}
	return c
}

func refParseBlock(it []byte) Block {
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

// FuzzParseLine: the one-pass parse gives what the walk of the type and
// then of each value gave, for ParseLine and for Parse: the same record or
// the same error, on any line.
func FuzzParseLine(f *testing.F) {
	for _, s := range parseLineSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := ParseLine(line)
		want, werr := refParseLine(line)
		sameRecord(t, "ParseLine", line, got, err, want, werr)
		// A LineParser reads the line again with the strings of its first
		// reading.
		var lp LineParser
		for range 2 {
			got, err = lp.ParseLine(line)
			sameRecord(t, "LineParser.ParseLine", line, got, err, want, werr)
		}
		wl, wu, wp, wlerr := ParseLineLink(line)
		for range 2 {
			gl, gu, gp, glerr := lp.ParseLineLink(line)
			sameRecord(t, "LineParser.ParseLineLink", line, gl, glerr, wl, wlerr)
			if !bytes.Equal(gu, wu) || !bytes.Equal(gp, wp) {
				t.Fatalf("LineParser.ParseLineLink(%q): uuid %q parent %q, ParseLineLink %q %q", line, gu, gp, wu, wp)
			}
		}
		got, err = Parse(append([]byte(nil), line...))
		want, werr = refParseTorn(append([]byte(nil), line...))
		sameRecord(t, "Parse", line, got, err, want, werr)
	})
}

var parseLineSeeds = []string{
	`{"type":"user","uuid":"u","message":{"role":"user","content":"hi"}}`,
	`{"parentUuid":"p","isSidechain":true,"sessionId":"s","type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"Bash","input":{"c":"ls"}}],"usage":{"input_tokens":1}},"uuid":"u","timestamp":"2024-01-01T10:00:05.123Z"}`,
	`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}],"is_error":true}]},"toolUseResult":{"a":1}}`,
	`{"message":{"content":[]},"uuid":"u","type":"user"}`,
	`{"type":"system","subtype":"api_error","retryAttempt":2,"maxRetries":10,"error":{"status":529},"version":"2.1.197"}`,
	`{"type":"system","subtype":"compact_boundary","compactMetadata":{"trigger":"auto","preTokens":5}}`,
	`{"type":"progress","data":{"x":1}}`, `{"a":1}`, `[1]`, `"s"`, `{"type":`, ` {"type":"user"} `,
	`{"type":"user","message":{"content":[{"type":"text","text":x{}]}}`,
	`{"type":"user","message":{"a":x"},"b":"}"}`,
	`{"type":"assistant","message":{"content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}}`,
	`{"type":"summary","summary":"s","leafUuid":"l"}`,
	`{"type":"user","uuid":"a","message":{"content":"x` + `{"type":"user","uuid":"b","message":{"content":"y"}}`,
	`{"typ\u0065":"user","uuid":"u"}`,
}

func sameRecord(t *testing.T, what string, line []byte, got *Record, err error, want *Record, werr error) {
	t.Helper()
	if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("%s(%q): error %v, the reference's %v", what, line, err, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s(%q):\n got %s\nwant %s", what, line, dump(got), dump(want))
	}
}

func dump(r *Record) string {
	if r == nil {
		return "nil"
	}
	s := fmt.Sprintf("%+v", *r)
	if r.Message != nil {
		s += fmt.Sprintf("\nmessage %+v", *r.Message)
		for _, b := range r.Message.Content.Blocks {
			s += fmt.Sprintf("\nblock %+v", b)
		}
	}
	return s
}

// Every line of the corpus reads the same with the one-pass parse as with
// the reference, and with a LineParser that read the lines before it.
func TestParseLineCorpus(t *testing.T) {
	var files []string
	err := filepath.WalkDir("../testdata/corpus", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var lp LineParser
		for _, line := range bytes.Split(b, []byte("\n")) {
			got, err := ParseLine(line)
			want, werr := refParseLine(line)
			sameRecord(t, "ParseLine", line, got, err, want, werr)
			got, err = lp.ParseLine(line)
			sameRecord(t, "LineParser.ParseLine", line, got, err, want, werr)
			n++
		}
	}
	if n < 5000 {
		t.Fatalf("only %d lines read", n)
	}
}

// ParseLine allocates what the record keeps and little else: a record of
// another type only its Record (its type a constant), an assistant record
// its copy, the record, the message, the block list and the strings it
// keeps (the reference took 2 and 20).
func TestParseLineAllocs(t *testing.T) {
	for _, tc := range []struct {
		line string
		max  float64
	}{
		{`{"parentUuid":"6f9d1c2e-0b7a-4d1e-9c1a-2b3c4d5e6f70","isSidechain":false,"userType":"external","cwd":"/home/dev/project","sessionId":"89eecacc-1147-4659-85f5-9b202b423a85","version":"2.1.330","type":"progress","data":{"type":"hook_progress","hookEvent":"PostToolUse"},"uuid":"0e07d554-640c-42d7-af7a-a4171883a107","timestamp":"2026-11-27T10:14:40.865Z"}`, 1},
		// copy, Record, Message, blocks, parentUuid, sessionId, uuid,
		// message id, model, text (and its pointer), tool id, tool name.
		{`{"parentUuid":"6f9d1c2e-0b7a-4d1e-9c1a-2b3c4d5e6f70","isSidechain":false,"userType":"external","cwd":"/home/dev/project","sessionId":"89eecacc-1147-4659-85f5-9b202b423a85","version":"2.1.330","type":"assistant","message":{"id":"msg_01XYZabcdefghijklmnopq","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Looking at the auth module now."},{"type":"tool_use","id":"toolu_01ABCdefghijklmnopqrstu","name":"Read","input":{"file_path":"src/auth.ts"}}],"usage":{"input_tokens":10,"output_tokens":5}},"uuid":"0e07d554-640c-42d7-af7a-a4171883a107","timestamp":"2026-11-27T10:14:40.865Z"}`, 13},
	} {
		line := []byte(tc.line)
		n := testing.AllocsPerRun(100, func() {
			if _, err := ParseLine(line); err != nil {
				t.Fatal(err)
			}
		})
		ref := testing.AllocsPerRun(100, func() { refParseLine(line) })
		t.Logf("%.0f allocations, the reference %.0f", n, ref)
		if n > tc.max {
			t.Errorf("ParseLine: %.0f allocations, want at most %.0f (the reference: %.0f)", n, tc.max, ref)
		}
	}
}

// FuzzUTCMillis: what the reading of Claude's own time format reads,
// time.Parse reads as the same instant.
func FuzzUTCMillis(f *testing.F) {
	for _, s := range []string{`"2026-11-27T10:14:40.865Z"`, `"2024-01-01T10:00:00Z"`, `"2024-02-30T10:00:00Z"`,
		`"2023-02-29T00:00:00.1Z"`, `"2024-02-29T23:59:59.123456789Z"`, `"0000-01-01T00:00:00Z"`, `"2024-01-01T24:00:00Z"`,
		`"2024-01-01T10:00:00.Z"`, `"2024-01-01T10:00:00.1234567891Z"`, `"2024-01-01T10:00:00+01:00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got, ok := utcMillis(v)
		if !ok {
			return
		}
		s, sok := unquote(v)
		want, err := time.Parse(time.RFC3339Nano, s)
		if !sok || err != nil || want.UnixMilli() != got {
			t.Fatalf("utcMillis(%s) = %d; time.Parse: %v, %v", v, got, want.UnixMilli(), err)
		}
	})
}

// Claude's times are read without a string made of them, and as
// time.Parse reads them.
func TestUTCMillis(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{`"2026-11-27T10:14:40.865Z"`, true}, {`"2024-01-01T10:00:00Z"`, true}, {`"2024-02-29T23:59:59.123456789Z"`, true},
		{`"2024-02-30T10:00:00Z"`, false}, {`"2023-02-29T00:00:00Z"`, false}, {`"2024-01-01T24:00:00Z"`, false},
		{`"2024-01-01T10:00:00+01:00"`, false}, {`"2024-01-01T10:00:00.Z"`, false},
	} {
		got, ok := utcMillis([]byte(tc.v))
		if ok != tc.ok {
			t.Errorf("utcMillis(%s): ok %v, want %v", tc.v, ok, tc.ok)
			continue
		}
		want, err := time.Parse(time.RFC3339Nano, tc.v[1:len(tc.v)-1])
		if ok && (err != nil || want.UnixMilli() != got) {
			t.Errorf("utcMillis(%s) = %d, time.Parse %d (%v)", tc.v, got, want.UnixMilli(), err)
		}
		if got := parseTime([]byte(tc.v)); err == nil && got != want.UnixMilli() {
			t.Errorf("parseTime(%s) = %d, want %d", tc.v, got, want.UnixMilli())
		}
	}
	v := []byte(`"2026-11-27T10:14:40.865Z"`)
	if n := testing.AllocsPerRun(100, func() { parseTime(v) }); n != 0 {
		t.Errorf("parseTime: %.0f allocations, want none", n)
	}
}

// A LineParser makes the strings the records of a transcript repeat once:
// the second of two records of a session (its parent the first, the same
// session, message and model) allocates less than the first.
func TestLineParserReusesStrings(t *testing.T) {
	first := []byte(`{"parentUuid":null,"sessionId":"89eecacc-1147-4659-85f5-9b202b423a85","type":"assistant","message":{"id":"msg_01XYZabcdefghijklmnopq","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"hm"}]},"uuid":"0e07d554-640c-42d7-af7a-a4171883a107"}`)
	second := []byte(`{"parentUuid":"0e07d554-640c-42d7-af7a-a4171883a107","sessionId":"89eecacc-1147-4659-85f5-9b202b423a85","type":"assistant","message":{"id":"msg_01XYZabcdefghijklmnopq","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}]},"uuid":"1f18e665-751d-53e8-b5f5-a5282994b218"}`)
	alone := testing.AllocsPerRun(100, func() { ParseLine(second) })
	lp := &LineParser{}
	after := testing.AllocsPerRun(100, func() {
		*lp = LineParser{}
		lp.ParseLine(first)
		lp.ParseLine(second)
	}) - testing.AllocsPerRun(100, func() { ParseLine(first) })
	*lp = LineParser{}
	lp.ParseLine(first)
	t.Logf("the second record: %.0f allocations alone, %.0f after the first", alone, after)
	if after > alone-4 {
		t.Errorf("the second record after the first: %.0f allocations, want at most %.0f (parent, session, message id and model made before)", after, alone-4)
	}
	r, err := lp.ParseLine(second)
	if err != nil || r.ParentUUID != "0e07d554-640c-42d7-af7a-a4171883a107" || r.SessionID != "89eecacc-1147-4659-85f5-9b202b423a85" ||
		r.Message.ID != "msg_01XYZabcdefghijklmnopq" || r.Message.Model != "claude-sonnet-4-5" || r.UUID != "1f18e665-751d-53e8-b5f5-a5282994b218" {
		t.Fatalf("%+v, %v", r, err)
	}
}

// A value the cache holds is used only for the same bytes: an escaped
// form, a control character or invalid UTF-8 decodes as jsonStr does.
func TestLineParserCacheExact(t *testing.T) {
	var lp LineParser
	for _, v := range []string{`"ab"`, `"a\u0062"`, `"ab"`, `"a\nb"`, "\"a\nb\"", "\"\xffab\"", "\"\xffab\"", `"ab"`} {
		p := peeker{c: &lp.c}
		if got, want := p.cached([]byte(v)), jsonStr([]byte(v)); got != want {
			t.Errorf("cached(%q) = %q, jsonStr %q", v, got, want)
		}
	}
}

// refStr is peeker.str as it was: a search for each quote, the backslashes
// before it counted.
func refStr(p *peeker) (int, int, error) {
	p.i++
	start := p.i
	for {
		j := bytes.IndexByte(p.b[p.i:], '"')
		if j < 0 {
			return 0, 0, errTruncated
		}
		end := p.i + j
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

// FuzzPeekerStr: a string ends where it did when every quote was searched
// for, short or long, escapes anywhere.
func FuzzPeekerStr(f *testing.F) {
	for _, s := range []string{`"ab"`, `"a\"b"`, `"a\\"b`, `"` + strings.Repeat(`\\`, 20) + `\"x"`, `"` + strings.Repeat("a", 31) + `\"b"`,
		`"` + strings.Repeat("a", 30) + `\\"`, `"` + strings.Repeat("a", 31) + `\`, `"abc`, `"`, `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			return
		}
		p, q := peeker{b: b}, peeker{b: b}
		s1, e1, err1 := p.str()
		s2, e2, err2 := refStr(&q)
		if (err1 == nil) != (err2 == nil) || (err1 == nil && (s1 != s2 || e1 != e2 || p.i != q.i)) {
			t.Fatalf("str(%q) = %d %d %v (at %d), before %d %d %v (at %d)", b, s1, e1, err1, p.i, s2, e2, err2, q.i)
		}
	})
}
