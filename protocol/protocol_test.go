package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// §8.1 #1: every kind round-trips with exactly the documented keys.
func TestEnvelopeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		env  Envelope
		want string
	}{
		{"user text", Envelope{ID: "ca", Time: 1, Role: RoleUser, ClaudeUUID: "u-1", Ev: Event{T: KindText, Text: "hi"}},
			`{"id":"ca","time":1,"role":"user","claudeUuid":"u-1","ev":{"t":"text","text":"hi"}}`},
		{"empty text kept", Envelope{ID: "ca", Time: 1, Role: RoleUser, Ev: Event{T: KindText}},
			`{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":""}}`},
		{"thinking", Envelope{ID: "ca", Time: 2, Role: RoleAgent, Turn: "ct", Subagent: "cs", Ev: Event{T: KindText, Text: "hm", Thinking: true}},
			`{"id":"ca","time":2,"role":"agent","turn":"ct","subagent":"cs","ev":{"t":"text","text":"hm","thinking":true}}`},
		{"service", Envelope{ID: "ca", Time: 3, Role: RoleAgent, Ev: Event{T: KindService, Text: "Agent done"}},
			`{"id":"ca","time":3,"role":"agent","ev":{"t":"service","text":"Agent done"}}`},
		{"tool-call-start", Envelope{ID: "ca", Time: 4, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindToolCallStart, Call: "toolu_1", Name: "Bash", Title: "Bash call", Description: "Bash call", Args: json.RawMessage(`{ "command": "ls" }`)}},
			`{"id":"ca","time":4,"role":"agent","turn":"ct","ev":{"t":"tool-call-start","call":"toolu_1","name":"Bash","title":"Bash call","description":"Bash call","args":{"command":"ls"}}}`},
		{"tool-call-end plain", Envelope{ID: "ca", Time: 5, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindToolCallEnd, Call: "toolu_1"}},
			`{"id":"ca","time":5,"role":"agent","turn":"ct","ev":{"t":"tool-call-end","call":"toolu_1"}}`},
		{"tool-call-end D8", Envelope{ID: "ca", Time: 5, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindToolCallEnd, Call: "toolu_1", Error: true, Result: ptr("boom"), Truncated: true}},
			`{"id":"ca","time":5,"role":"agent","turn":"ct","ev":{"t":"tool-call-end","call":"toolu_1","error":true,"result":"boom","truncated":true}}`},
		{"file", Envelope{ID: "ca", Time: 6, Role: RoleUser, Ev: Event{T: KindFile, Ref: "r1", Name: "a.png", Size: ptr(int64(10)), MimeType: "image/png", Image: &Image{Width: 2, Height: 3, Thumbhash: "x"}}},
			`{"id":"ca","time":6,"role":"user","ev":{"t":"file","ref":"r1","name":"a.png","size":10,"mimeType":"image/png","image":{"width":2,"height":3,"thumbhash":"x"}}}`},
		{"turn-start", Envelope{ID: "ca", Time: 7, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindTurnStart}},
			`{"id":"ca","time":7,"role":"agent","turn":"ct","ev":{"t":"turn-start"}}`},
		{"turn-end", Envelope{ID: "ca", Time: 8, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindTurnEnd, Status: StatusCancelled}},
			`{"id":"ca","time":8,"role":"agent","turn":"ct","ev":{"t":"turn-end","status":"cancelled"}}`},
		{"start with title", Envelope{ID: "ca", Time: 9, Role: RoleAgent, Turn: "ct", Subagent: "cs", Ev: Event{T: KindStart, Title: "Count files"}},
			`{"id":"ca","time":9,"role":"agent","turn":"ct","subagent":"cs","ev":{"t":"start","title":"Count files"}}`},
		{"start without title", Envelope{ID: "ca", Time: 9, Role: RoleAgent, Turn: "ct", Subagent: "cs", Ev: Event{T: KindStart}},
			`{"id":"ca","time":9,"role":"agent","turn":"ct","subagent":"cs","ev":{"t":"start"}}`},
		{"stop", Envelope{ID: "ca", Time: 10, Role: RoleAgent, Turn: "ct", Subagent: "cs", Ev: Event{T: KindStop}},
			`{"id":"ca","time":10,"role":"agent","turn":"ct","subagent":"cs","ev":{"t":"stop"}}`},
		{"slash command", Envelope{ID: "ca", Time: 12, Role: RoleUser, Ev: Event{T: KindText, Text: "/compact keep it short", Command: &SlashCommand{Name: "/compact", Args: "keep it short"}}},
			`{"id":"ca","time":12,"role":"user","ev":{"t":"text","text":"/compact keep it short","command":{"name":"/compact","args":"keep it short"}}}`},
		{"slash command without args", Envelope{ID: "ca", Time: 12, Role: RoleUser, Ev: Event{T: KindText, Text: "/mcp", Command: &SlashCommand{Name: "/mcp"}}},
			`{"id":"ca","time":12,"role":"user","ev":{"t":"text","text":"/mcp","command":{"name":"/mcp"}}}`},
		{"api error retrying", Envelope{ID: "ca", Time: 13, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindService, Text: "API error 529, retrying",
			APIError: &APIError{Status: 529, Message: "overloaded", Retries: 1, Retrying: true, MaxRetries: 10, RetryInMs: 508}}},
			`{"id":"ca","time":13,"role":"agent","turn":"ct","ev":{"t":"service","text":"API error 529, retrying","apiError":{"status":529,"message":"overloaded","retries":1,"retrying":true,"maxRetries":10,"retryInMs":508}}}`},
		{"api error final", Envelope{ID: "ca", Time: 13, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindService, Text: "API Error: 400 bad",
			APIError: &APIError{Status: 400, Message: "bad"}}},
			`{"id":"ca","time":13,"role":"agent","turn":"ct","ev":{"t":"service","text":"API Error: 400 bad","apiError":{"status":400,"message":"bad","retries":0}}}`},
		{"compaction", Envelope{ID: "ca", Time: 14, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindService, Text: "Conversation compacted",
			Compaction: &Compaction{Trigger: "manual", PreTokens: ptr(int64(19)), PostTokens: ptr(int64(2544))}}},
			`{"id":"ca","time":14,"role":"agent","turn":"ct","ev":{"t":"service","text":"Conversation compacted","compaction":{"trigger":"manual","preTokens":19,"postTokens":2544}}}`},
		{"compaction without counts", Envelope{ID: "ca", Time: 14, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindService, Text: "Conversation compacted",
			Compaction: &Compaction{Trigger: "auto"}}},
			`{"id":"ca","time":14,"role":"agent","turn":"ct","ev":{"t":"service","text":"Conversation compacted","compaction":{"trigger":"auto"}}}`},
		{"tool-call-end diff", Envelope{ID: "ca", Time: 15, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindToolCallEnd, Call: "toolu_1", Result: ptr("ok"),
			Diff: &Diff{Path: "/p/a.txt", Op: DiffUpdate, Hunks: []Hunk{{OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 2, Lines: []string{"-a", "+A", "+b"}}}, Truncated: true}}},
			`{"id":"ca","time":15,"role":"agent","turn":"ct","ev":{"t":"tool-call-end","call":"toolu_1","result":"ok","diff":{"path":"/p/a.txt","op":"update","hunks":[{"oldStart":1,"oldLines":1,"newStart":1,"newLines":2,"lines":["-a","+A","+b"]}],"truncated":true}}}`},
		{"tool-call-end diff of an empty file", Envelope{ID: "ca", Time: 15, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindToolCallEnd, Call: "toolu_1",
			Diff: &Diff{Path: "/p/e.txt", Op: DiffCreate}}},
			`{"id":"ca","time":15,"role":"agent","turn":"ct","ev":{"t":"tool-call-end","call":"toolu_1","diff":{"path":"/p/e.txt","op":"create","hunks":[]}}}`},
		{"usage with unknown keys", Envelope{ID: "ca", Time: 11, Role: RoleAgent, Turn: "ct",
			Usage: &Usage{InputTokens: 3, OutputTokens: 4, CacheReadInputTokens: ptr(int64(5)), Extra: map[string]json.RawMessage{"server_tool_use": json.RawMessage(`{"web_search_requests": 0}`)}},
			Ev:    Event{T: KindText, Text: "x"}},
			`{"id":"ca","time":11,"role":"agent","turn":"ct","usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5,"server_tool_use":{"web_search_requests":0}},"ev":{"t":"text","text":"x"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.env.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got, err := json.Marshal(tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("encoded\n got %s\nwant %s", got, tt.want)
			}
			if strings.Contains(string(got), "null") {
				t.Fatalf("optional field written as null: %s", got)
			}
			var back Envelope
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("decode: %v", err)
			}
			again, _ := json.Marshal(back)
			if string(again) != tt.want {
				t.Fatalf("round trip\n got %s\nwant %s", again, tt.want)
			}
		})
	}
}

// §8.1 #2: what Validate (or decoding) must reject.
func TestValidateRejects(t *testing.T) {
	ok := func() Envelope {
		return Envelope{ID: "ca", Time: 1, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindText, Text: "x"}}
	}
	tests := []struct {
		name string
		mod  func(*Envelope)
	}{
		{"role session", func(e *Envelope) { e.Role = "session" }},
		{"empty role", func(e *Envelope) { e.Role = "" }},
		{"missing id", func(e *Envelope) { e.ID = "" }},
		{"id not a cuid2", func(e *Envelope) { e.ID = "Not-A-Cuid" }},
		{"id too long", func(e *Envelope) { e.ID = "c" + strings.Repeat("a", 32) }},
		{"negative time", func(e *Envelope) { e.Time = -1 }},
		{"turn not a cuid2", func(e *Envelope) { e.Turn = "turn_1" }},
		{"turn uppercase", func(e *Envelope) { e.Turn = "cT" }},
		{"service from user", func(e *Envelope) { e.Role = RoleUser; e.Ev = Event{T: KindService, Text: "x"} }},
		{"start from user", func(e *Envelope) { e.Role = RoleUser; e.Ev = Event{T: KindStart} }},
		{"stop from user", func(e *Envelope) { e.Role = RoleUser; e.Ev = Event{T: KindStop} }},
		{"provider id as subagent", func(e *Envelope) { e.Subagent = "provider-tool-id" }},
		{"uppercase subagent", func(e *Envelope) { e.Subagent = "cABC" }},
		{"subagent leading digit", func(e *Envelope) { e.Subagent = "1abc" }},
		{"subagent length 1", func(e *Envelope) { e.Subagent = "c" }},
		{"subagent length 33", func(e *Envelope) { e.Subagent = "c" + strings.Repeat("a", 32) }},
		{"turn-end canceled", func(e *Envelope) { e.Ev = Event{T: KindTurnEnd, Status: "canceled"} }},
		{"turn-end without status", func(e *Envelope) { e.Ev = Event{T: KindTurnEnd} }},
		{"full without truncated", func(e *Envelope) { r := "x"; e.Ev = Event{T: KindToolCallEnd, Call: "t", Result: &r, Full: 5} }},
		{"negative full", func(e *Envelope) {
			r := "x"
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Result: &r, Truncated: true, Full: -1}
		}},
		{"full over MaxFullResultBytes", func(e *Envelope) {
			r := "x"
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Result: &r, Truncated: true, Full: MaxFullResultBytes + 1}
		}},
		{"tool-call-start without args", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallStart, Call: "t", Name: "Bash", Title: "x", Description: "x"}
		}},
		{"tool-call-start args not object", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallStart, Call: "t", Name: "Bash", Title: "x", Description: "x", Args: json.RawMessage(`[1]`)}
		}},
		{"tool-call-start without name", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallStart, Call: "t", Title: "x", Description: "x", Args: json.RawMessage(`{}`)}
		}},
		{"tool-call-end without call", func(e *Envelope) { e.Ev = Event{T: KindToolCallEnd} }},
		{"tool-call-end result too long", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Result: ptr(strings.Repeat("x", MaxResultBytes+1))}
		}},
		{"file without size", func(e *Envelope) { e.Ev = Event{T: KindFile, Ref: "r", Name: "n"} }},
		{"command from agent", func(e *Envelope) { e.Ev = Event{T: KindText, Text: "/x", Command: &SlashCommand{Name: "/x"}} }},
		{"command without name", func(e *Envelope) { e.Role = RoleUser; e.Ev = Event{T: KindText, Command: &SlashCommand{}} }},
		{"command args too long", func(e *Envelope) {
			e.Role = RoleUser
			e.Ev = Event{T: KindText, Command: &SlashCommand{Name: "/x", Args: strings.Repeat("a", MaxDetailBytes+1)}}
		}},
		{"api error negative status", func(e *Envelope) { e.Ev = Event{T: KindService, APIError: &APIError{Status: -1}} }},
		{"api error message too long", func(e *Envelope) {
			e.Ev = Event{T: KindService, APIError: &APIError{Message: strings.Repeat("a", MaxDetailBytes+1)}}
		}},
		{"compaction negative tokens", func(e *Envelope) { e.Ev = Event{T: KindService, Compaction: &Compaction{PreTokens: ptr(int64(-1))}} }},
		{"diff bad op", func(e *Envelope) { e.Ev = Event{T: KindToolCallEnd, Call: "t", Diff: &Diff{Op: "delete"}} }},
		{"diff too many hunks", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Diff: &Diff{Op: DiffUpdate, Hunks: make([]Hunk, MaxDiffHunks+1)}}
		}},
		{"diff too many lines", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Diff: &Diff{Op: DiffUpdate, Hunks: []Hunk{{Lines: make([]string, MaxDiffLines+1)}}}}
		}},
		{"diff too many bytes", func(e *Envelope) {
			line := "+" + strings.Repeat("a", MaxDiffLineBytes-1)
			n := MaxDiffBytes/len(line) + 1
			lines := make([]string, n)
			for i := range lines {
				lines[i] = line
			}
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Diff: &Diff{Op: DiffUpdate, Hunks: []Hunk{{Lines: lines}}}}
		}},
		{"diff line too long", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Diff: &Diff{Op: DiffUpdate, Hunks: []Hunk{{Lines: []string{strings.Repeat("a", MaxDiffLineBytes+1)}}}}}
		}},
		{"diff negative line number", func(e *Envelope) {
			e.Ev = Event{T: KindToolCallEnd, Call: "t", Diff: &Diff{Op: DiffUpdate, Hunks: []Hunk{{OldStart: -1}}}}
		}},
		{"unknown kind", func(e *Envelope) { e.Ev = Event{T: "bogus"} }},
		{"negative usage", func(e *Envelope) { e.Usage = &Usage{InputTokens: -1} }},
		{"zero context window", func(e *Envelope) { e.Usage = &Usage{ContextWindow: ptr(int64(0))} }},
	}
	base := ok()
	if err := base.Validate(); err != nil {
		t.Fatalf("base envelope invalid: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ok()
			tt.mod(&e)
			if err := e.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, in := range []string{
		`{"id":"a","time":1,"role":"agent","ev":{"t":"turn-end"}}`,
		`{"id":"a","time":1,"role":"agent","ev":{"t":"start","title":5}}`,
		`{"id":"a","time":1,"role":"agent","ev":{"t":"service"}}`,
		`{"id":"a","time":1,"role":"agent","ev":{"t":"tool-call-start","call":"c","name":"n","title":"t","description":"d"}}`,
		`{"id":"a","time":1,"role":"user","ev":{"t":"file","ref":"r","name":"n"}}`,
		`{"id":"a","time":1,"role":"agent","ev":{"t":"nope"}}`,
		`{"time":1,"role":"agent","ev":{"t":"stop"}}`,
		`{"id":"a","time":1,"role":"agent","usage":{"input_tokens":"lots","output_tokens":1},"ev":{"t":"stop"}}`,
		`{"id":"ca","time":1,"role":"agent","ev":{"t":"service","text":"x","apiError":{"status":500}}}`,
		`{"id":"ca","time":1,"role":"agent","ev":{"t":"service","text":"x","compaction":[]}}`,
		`{"id":"ca","time":1,"role":"user","ev":{"t":"text","text":"x","command":"/x"}}`,
		`{"id":"ca","time":1,"role":"agent","ev":{"t":"tool-call-end","call":"c","diff":{"op":"update","hunks":[{"lines":[1]}]}}}`,
	} {
		var e Envelope
		if err := json.Unmarshal([]byte(in), &e); err == nil {
			if err := e.Validate(); err == nil {
				t.Errorf("accepted %s", in)
			}
		}
	}
}

// §8.1 #4: service_tier null omitted; unknown usage keys preserved.
func TestUsageLenient(t *testing.T) {
	var u Usage
	if err := json.Unmarshal([]byte(`{"input_tokens":0,"output_tokens":0,"service_tier":null,"cache_creation":{"ephemeral_5m_input_tokens":0}}`), &u); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(u)
	if want := `{"input_tokens":0,"output_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0}}`; string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
	if err := json.Unmarshal([]byte(`{"input_tokens":"lots","output_tokens":1}`), &u); err == nil {
		t.Fatal("malformed usage accepted")
	}
	if err := json.Unmarshal([]byte(`{"output_tokens":1}`), &u); err == nil {
		t.Fatal("usage without input_tokens accepted")
	}
}

// §8.1 #3 and reference-behavior §1.4: the subagent vectors.
func TestSubagentIDVectors(t *testing.T) {
	for in, want := range map[string]string{
		"toolu_01EmKA8FJ7B2Ah9seGxK1Wct": "c55a0d1eccaf1bf1c20ab88d",
		"toolu_01DAkBr3THZbTNLPPBHiX1sp": "ce4fb421c7f0b703efb88ea3",
		"task-buffer-1":                  "cf7d37da13822719b172d2f0",
		"tool-agent-stable":              "c2d6f88e5f0aa155a20f4f70",
		"toolu_task_1":                   "cdbc6ff5ad64b06ccfa061c7",
	} {
		got := SubagentID(in)
		if got != want {
			t.Errorf("SubagentID(%q) = %q, want %q", in, got, want)
		}
		if !IsCuid(got) {
			t.Errorf("SubagentID(%q) = %q is not a cuid2", in, got)
		}
	}
}

var cuidRe = regexp.MustCompile(`^[a-z][0-9a-z]+$`)

func TestIsCuid(t *testing.T) {
	for s, want := range map[string]bool{
		"ab": true, "a1": true, "c55a0d1eccaf1bf1c20ab88d": true, strings.Repeat("a", 32): true,
		"a": false, strings.Repeat("a", 33): false, "1a": false, "aB": false, "a-b": false, "": false, "toolu_1": false,
	} {
		if got := IsCuid(s); got != want {
			t.Errorf("IsCuid(%q) = %v", s, got)
		}
	}
}

func TestNewIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := New()
		if len(id) != IDLength || !IsCuid(id) || !cuidRe.MatchString(id) {
			t.Fatalf("New() = %q breaks the cuid2 rules", id)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestDeriveID(t *testing.T) {
	a := DeriveID("s", "uuid-1", "0", "text")
	if a != DeriveID("s", "uuid-1", "0", "text") {
		t.Fatal("DeriveID is not deterministic")
	}
	if !IsCuid(a) || len(a) != IDLength {
		t.Fatalf("DeriveID gave %q", a)
	}
	if DeriveID("ab", "c") == DeriveID("a", "bc") {
		t.Fatal("DeriveID does not separate its parts")
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"plain", "quote\" back\\", "<script>&", "ctl\x01\x1f\t\n\r", "bad\xff utf8", "sep\u2028\u2029", "émoji 🎉"} {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// The encoding is a fixed point of encoding/json: an envelope carried inside
// another JSON document (outbox entries, relay frames) keeps its bytes.
func TestEncodingStableUnderEncodingJSON(t *testing.T) {
	e := Envelope{ID: "ca", Time: 1, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindToolCallStart, Call: "c", Name: "Bash",
		Title: "a -> b & <c>", Description: "d", Args: json.RawMessage(`{"command": "x -> y && z < w \u2028"}`)},
		Usage: &Usage{Extra: map[string]json.RawMessage{"k": json.RawMessage(`"<&>"`)}}}
	b, err := e.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, _ := json.Marshal(struct {
		E json.RawMessage `json:"e"`
	}{b})
	var back struct {
		E json.RawMessage `json:"e"`
	}
	json.Unmarshal(wrapped, &back)
	if string(back.E) != string(b) {
		t.Fatalf("re-encoded:\n%s\n%s", back.E, b)
	}
}

func TestIsSessionID(t *testing.T) {
	for s, want := range map[string]bool{
		"fc141a3b-db42-42fd-b003-09c712c8bbfd":  true,
		"11110000-0000-4000-8000-000000000001":  true,
		"FC141A3B-DB42-42FD-B003-09C712C8BBFD":  false, // Claude writes lowercase
		"fc141a3b-db42-42fd-b003-09c712c8bbf":   false,
		"fc141a3b-db42-42fd-b003-09c712c8bbfdd": false,
		"fc141a3bxdb42-42fd-b003-09c712c8bbfd":  false,
		"fc141a3b-db42-42fd-b003-09c712c8bbfg":  false,
		"--dangerously-skip-permissions":        false,
		"s1":                                    false,
		"":                                      false,
	} {
		if got := IsSessionID(s); got != want {
			t.Errorf("IsSessionID(%q) = %v", s, got)
		}
	}
	for range 100 {
		if id := New(); IsSessionID(id) {
			t.Fatalf("a cuid2 %q passes as a session id", id)
		}
	}
}

func TestCheckUTF8(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{`{"text":"héllo ✓"}`, ""},
		{"{\"text\":\"a\xffb\"}", "invalid UTF-8 at byte 10"},
		{"\xc3", "invalid UTF-8 at byte 0"},
		{"ok\xed\xa0\x80", "invalid UTF-8 at byte 2"}, // an encoded surrogate
	} {
		err := CheckUTF8([]byte(tc.in))
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("CheckUTF8(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestCommandValidate(t *testing.T) {
	ok := func() Command { return Command{ID: "k3x9ab", Kind: CommandPrompt, Text: "run the tests"} }
	if c := ok(); c.Validate() != nil {
		t.Fatalf("base command invalid: %v", c.Validate())
	}
	if c := (Command{ID: "k3x9ab", Kind: CommandStopTask, Subagent: SubagentID("toolu_1")}); c.Validate() != nil {
		t.Fatalf("stop-task invalid: %v", c.Validate())
	}
	const sess = "22222222-2222-4333-8444-555555555555"
	for _, c := range []Command{
		{ID: "k3x9ab", Kind: CommandStart, Dir: "/home/me/app", Target: sess, Text: "hi", Mode: "plan", Model: "sonnet"},
		{ID: "k3x9ab", Kind: CommandStart, Dir: `C:\Users\me\app`, Target: sess, Resume: true},
		{ID: "k3x9ab", Kind: CommandStop, Target: sess},
		{ID: "k3x9ab", Kind: CommandStart, Dir: "/home/me/app", Target: sess, Text: "hi", Agent: AgentCodex},
		{ID: "k3x9ab", Kind: CommandStart, Dir: "/home/me/app", Target: sess, Text: "hi", Agent: AgentClaude},
	} {
		if err := c.Validate(); err != nil {
			t.Fatalf("%s invalid: %v", c.Kind, err)
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(*Command)
	}{
		{"empty id", func(c *Command) { c.ID = "" }},
		{"id with a dash", func(c *Command) { c.ID = "--model" }},
		{"uppercase id", func(c *Command) { c.ID = "P1" }},
		{"id too long", func(c *Command) { c.ID = "c" + strings.Repeat("a", 32) }},
		{"unknown kind", func(c *Command) { c.Kind = "fly" }},
		{"long model", func(c *Command) { c.Kind = CommandModel; c.Model = strings.Repeat("m", MaxFieldBytes+1) }},
		{"long request id", func(c *Command) { c.Kind = CommandPermission; c.RequestID = strings.Repeat("r", MaxFieldBytes+1) }},
		{"long text", func(c *Command) { c.Text = strings.Repeat("x", MaxCommandBytes+1) }},
		{"input not an object", func(c *Command) { c.Kind = CommandPermission; c.Input = json.RawMessage(`[1]`) }},
		{"stop-task without a subagent", func(c *Command) { c.Kind = CommandStopTask }},
		{"stop-task, a subagent that is no id", func(c *Command) { c.Kind = CommandStopTask; c.Subagent = "../x" }},
		{"start without a folder", func(c *Command) { c.Kind = CommandStart; c.Target = sess }},
		{"start without a session", func(c *Command) { c.Kind = CommandStart; c.Dir = "/tmp" }},
		{"start, a session that is a flag", func(c *Command) { c.Kind = CommandStart; c.Dir = "/tmp"; c.Target = "--help" }},
		{"start, a long folder", func(c *Command) {
			c.Kind = CommandStart
			c.Target = sess
			c.Dir = "/" + strings.Repeat("d", MaxDirBytes)
		}},
		{"start, a folder not UTF-8", func(c *Command) { c.Kind = CommandStart; c.Target = sess; c.Dir = "/\xff" }},
		{"stop without a session", func(c *Command) { c.Kind = CommandStop }},
		{"start, an unknown agent", func(c *Command) { c.Kind = CommandStart; c.Target = sess; c.Dir = "/tmp"; c.Agent = "gemini" }},
		{"an agent on a prompt", func(c *Command) { c.Agent = AgentCodex }},
		{"sealed with a readable agent", func(c *Command) { c.Kind = CommandStart; c.Sealed = "abc"; c.Agent = AgentCodex; c.Text = "" }},
		{"sealed with a readable folder", func(c *Command) { c.Kind = CommandStart; c.Sealed = "abc"; c.Dir = "/tmp"; c.Text = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.mod(&c)
			if c.Validate() == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestFullRoundTrip(t *testing.T) {
	r := "head"
	in := Envelope{ID: "ca", Time: 1, Role: RoleAgent, Turn: "ct", Ev: Event{T: KindToolCallEnd, Call: "t", Result: &r, Truncated: true, Full: 9000},
		Blob: []byte("never in JSON")}
	raw, err := in.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"truncated":true,"full":9000`) || strings.Contains(string(raw), "never") {
		t.Fatalf("encoded %s", raw)
	}
	var out Envelope
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.Ev.Full != 9000 || out.Validate() != nil {
		t.Fatalf("decoded full %d, validate %v", out.Ev.Full, out.Validate())
	}
	if err := json.Unmarshal([]byte(`{"id":"ca","time":1,"role":"agent","ev":{"t":"tool-call-end","call":"t","result":"x","truncated":true,"full":"9"}}`), &out); err == nil {
		t.Error("a full that is not an integer was taken")
	}
}

// A daemon's description in lists is bounded whatever it announces: the
// most recent folders as far as DaemonSummaryBytes allows, ids checked,
// prompts cut; a daemon's session can be named by the sessions it started.
func TestSummarizeDaemon(t *testing.T) {
	const sess = "22222222-2222-4333-8444-555555555555"
	const thread = "33333333-2222-4333-8444-555555555555"
	const other = "44444444-2222-4333-8444-555555555555"
	d := DaemonInfo{OS: "linux", ClaudeVersion: "2.1.330", AllowBypass: true, Running: []string{sess, thread, "../x"},
		Threads: map[string]string{sess: thread, other: thread, thread: "../x"}}
	for i := range 1000 {
		f := DaemonFolder{Dir: fmt.Sprintf("/home/me/project-%04d/%s", i, strings.Repeat("d", 200)), At: int64(i)}
		for range 20 {
			f.Sessions = append(f.Sessions, PastSession{ID: sess, Prompt: strings.Repeat("p", 1000), At: 1})
		}
		f.Sessions = append(f.Sessions, PastSession{ID: "not-a-session"})
		d.Folders = append(d.Folders, f)
	}
	raw, _ := json.Marshal(map[string]any{"mode": "machine", "status": "idle", "daemon": d, "startedBy": "nope"})
	sum := SummarizeInfo(raw)
	if len(sum) > MaxSummaryBytes {
		t.Fatalf("summary is %d bytes, more than %d", len(sum), MaxSummaryBytes)
	}
	var got struct {
		StartedBy string      `json:"startedBy"`
		Daemon    *DaemonInfo `json:"daemon"`
	}
	if err := json.Unmarshal(sum, &got); err != nil || got.Daemon == nil {
		t.Fatalf("summary %s: %v", sum[:min(len(sum), 200)], err)
	}
	if got.StartedBy != "" {
		t.Errorf("startedBy %q kept", got.StartedBy)
	}
	g := got.Daemon
	// A start's thread is kept where both ids run and are session ids.
	if len(g.Threads) != 1 || g.Threads[sess] != thread {
		t.Errorf("threads %v, want only %s: %s", g.Threads, sess, thread)
	}
	if g.OS != "linux" || !g.AllowBypass || len(g.Running) != 2 || len(g.Folders) == 0 || len(g.Folders) == 1000 {
		t.Fatalf("daemon summary: os %q bypass %v running %v folders %d", g.OS, g.AllowBypass, g.Running, len(g.Folders))
	}
	if g.Folders[0].Dir != d.Folders[0].Dir {
		t.Errorf("first folder %q, want the most recent %q", g.Folders[0].Dir, d.Folders[0].Dir)
	}
	for _, f := range g.Folders {
		if len(f.Sessions) != DaemonSessions {
			t.Fatalf("%d sessions kept, want %d", len(f.Sessions), DaemonSessions)
		}
		if len(f.Sessions[0].Prompt) > DaemonPromptBytes+8 {
			t.Fatalf("prompt of %d bytes kept", len(f.Sessions[0].Prompt))
		}
	}
	started, _ := json.Marshal(map[string]any{"mode": "remote", "startedBy": sess})
	if !strings.Contains(string(SummarizeInfo(started)), `"startedBy":"`+sess+`"`) {
		t.Errorf("startedBy dropped: %s", SummarizeInfo(started))
	}
	as, _ := json.Marshal(map[string]any{"mode": "remote", "startedAs": sess})
	if !strings.Contains(string(SummarizeInfo(as)), `"startedAs":"`+sess+`"`) {
		t.Errorf("startedAs dropped: %s", SummarizeInfo(as))
	}
	if bad, _ := json.Marshal(map[string]any{"mode": "remote", "startedAs": "nope"}); strings.Contains(string(SummarizeInfo(bad)), "startedAs") {
		t.Errorf("a startedAs that is no session id kept: %s", SummarizeInfo(bad))
	}
}
