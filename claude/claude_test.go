package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestPeekType(t *testing.T) {
	tests := []struct {
		line    string
		want    string
		wantErr bool
	}{
		{`{"type":"user","uuid":"u"}`, "user", false},
		{`{"parentUuid":null,"attachment":{"type":"deferred_tools_delta"},"type":"attachment"}`, "attachment", false},
		{`{"a":"x\"type\":\"user","type":"queue-operation"}`, "queue-operation", false},
		{`{"a":[{"type":"user"},"}"],"b":{"c":{"type":"assistant"}},"type":"progress"}`, "progress", false},
		{`{"type":"us\u0065r"}`, "user", false},
		{` { "type" : "system" } `, "system", false},
		{`{"uuid":"x"}`, "", false},
		{`{"type":5}`, "", false},
		{`{"type":"user","message":{"content":"trunc`, "", true},
		{`{"message":{"content":"trunc`, "", true},
		{`"just a string"`, "", true},
		{`[1,2]`, "", true},
		{`null`, "", true},
		{`[hh:mm] not json`, "", true},
		{``, "", true},
	}
	for _, tt := range tests {
		got, err := PeekType([]byte(tt.line))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("PeekType(%s) = %q, %v; want %q, err=%v", tt.line, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseLenient(t *testing.T) {
	r, err := Parse([]byte(`{"type":"assistant","uuid":"a1","parentUuid":"p","isSidechain":true,"agentId":"ab","timestamp":"2026-11-22T18:59:35.149Z","newField":{"x":1},"message":{"id":"m1","model":"x","content":[{"type":"text","text":"hi"},{"type":"brand_new","foo":1},"not a block",{"type":"tool_use","id":"t","name":"Bash","input":{"a":1}}],"usage":{"input_tokens":1,"output_tokens":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Type != TypeAssistant || r.UUID != "a1" || r.ParentUUID != "p" || !r.IsSidechain || r.AgentID != "ab" || r.Timestamp != 1795373975149 {
		t.Fatalf("record %+v", r)
	}
	bs := r.Message.Content.Blocks
	if len(bs) != 4 || *bs[0].Text != "hi" || bs[1].Type != "brand_new" || bs[2].Type != "invalid" || bs[3].Name != "Bash" {
		t.Fatalf("blocks %+v", bs)
	}
	if r.Message.ID != "m1" || r.Message.Usage == nil {
		t.Fatal("message fields")
	}

	// Wrong types for known fields do not fail the parse.
	r, err = Parse([]byte(`{"type":"user","uuid":7,"isSidechain":"yes","message":"not an object","timestamp":"yesterday"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.UUID != "" || r.IsSidechain || r.Message != nil || r.Timestamp != 0 {
		t.Fatalf("record %+v", r)
	}

	// Unknown record types are recognised by their type only (D14).
	r, err = Parse([]byte(`{"type":"api-request-shape","shape":{"huge":[1,2,3]}}`))
	if err != nil || r.Type != "api-request-shape" || r.Message != nil {
		t.Fatalf("%+v %v", r, err)
	}

	// stream-json names.
	r, err = Parse([]byte(`{"type":"user","uuid":"u","session_id":"s","parent_tool_use_id":"toolu_1","agent_id":"a1","isSynthetic":true,"tool_use_result":{"isAsync":true},"message":{"role":"user","content":"x"}}`))
	if err != nil || r.SessionID != "s" || r.ParentToolUseID != "toolu_1" || r.AgentID != "a1" || !r.IsMeta || string(r.ToolUseResult) != `{"isAsync":true}` {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = Parse([]byte(`{"type":"user","uuid":"u","origin":{"kind":"task-notification"},"message":{"content":"<task-notification>"}}`))
	if err != nil || r.OriginKind != "task-notification" {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestKeysAndDedupe(t *testing.T) {
	p := func(s string) *Record {
		r, err := Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if k := Key(p(`{"type":"summary","summary":"S","leafUuid":"L"}`)); k != "summary: L: S" {
		t.Fatalf("summary key %q", k)
	}
	if k := Key(p(`{"type":"user","uuid":"u1","message":{"content":"x"}}`)); k != "u1" {
		t.Fatalf("key %q", k)
	}
	var d Dedupe
	a1 := p(`{"type":"assistant","uuid":"a1","message":{"id":"m","content":[{"type":"text","text":"lol"}]}}`)
	a2 := p(`{"type":"assistant","uuid":"a2","message":{"id":"m","content":[{"type":"text","text":"lol"}]}}`)
	a3 := p(`{"type":"assistant","uuid":"a3","message":{"id":"m","content":[{"type":"tool_use","id":"t"}]}}`)
	noKey := p(`{"type":"user","message":{"content":"x"}}`)
	if d.Seen(a1) {
		t.Fatal("first record seen")
	}
	if !d.Seen(a1) {
		t.Fatal("same uuid not deduped (seed 002 example 4)")
	}
	if !d.Seen(a2) {
		t.Fatal("D5: same message id and content under a new uuid not deduped")
	}
	if d.Seen(a3) {
		t.Fatal("D5: another block of the same message deduped")
	}
	if d.Seen(noKey) || d.Seen(noKey) {
		t.Fatal("record without key deduped")
	}
}

func TestToolResultText(t *testing.T) {
	for raw, want := range map[string]string{
		`"plain"`: "plain",
		`[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]`: "a\n[image]\nb",
		`{"odd":1}`: "",
		``:          "",
	} {
		if got := ToolResultText([]byte(raw)); got != want {
			t.Errorf("ToolResultText(%s) = %q want %q", raw, got, want)
		}
	}
}

// reference-behavior §3.1 and the peer report's observations (l).
func TestEscapeProjectPath(t *testing.T) {
	for in, want := range map[string]string{
		"/Users/steve/projects/my-app": "-Users-steve-projects-my-app",
		"app.test.js":                  "app-test-js",
		"app (copy)":                   "app--copy-",
		"[2024] my-project":            "-2024--my-project",
		"~backup":                      "-backup",
		"/Users/x/projects/~backup":    "-Users-x-projects--backup",
		"c++":                          "c--",
		"c#-app":                       "c--app",
		"key=value&foo":                "key-value-foo",
		"a,b;c":                        "a-b-c",
		"it's-done!":                   "it-s-done-",
		"user@gmail.com":               "user-gmail-com",
		"/w/My Proj.v2_x-y":            "-w-My-Proj-v2-x-y",
		"ünï cödé+@#%":                 "-n--c-d-----",
		"a🎉b":                          "a--b", // one astral char is two UTF-16 units
	} {
		if got := EscapeProjectPath(in); got != want {
			t.Errorf("EscapeProjectPath(%q) = %q, want %q", in, got, want)
		}
	}
	long := "/" + strings.Repeat("abcdefghij/", 28)
	got := EscapeProjectPath(long)
	h := int64(javaHash(utf16.Encode([]rune(long))))
	if h < 0 {
		h = -h
	}
	if len(got) <= 201 || got[:200] != EscapeProjectPath(long[:200]) || got[200] != '-' {
		t.Fatalf("long path: %q", got)
	}
}

func TestJavaHash(t *testing.T) {
	for s, want := range map[string]int32{"": 0, "hello": 99162322, "polygenelubricants": -2147483648} {
		if got := javaHash(utf16.Encode([]rune(s))); got != want {
			t.Errorf("javaHash(%q) = %d want %d", s, got, want)
		}
	}
	// Math.abs of the int32 minimum stays positive in JavaScript.
	long := strings.Repeat("x", 201) + "polygenelubricants"
	_ = EscapeProjectPath(long)
}

func TestConfigAndProjectDir(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	tests := []struct {
		name, env, home, want string
	}{
		{"unset", "", "/home/u", "/home/u/.claude"},
		{"custom", "/opt/claude", "/home/u", "/opt/claude"},
		{"relative kept as given", "rel/dir", "/home/u", "rel/dir"},
		{"trailing slash", "/opt/claude/", "/home/u", "/opt/claude/"},
	}
	for _, tt := range tests {
		if got := ConfigDir(env(tt.env), tt.home); got != tt.want {
			t.Errorf("%s: ConfigDir = %q want %q", tt.name, got, tt.want)
		}
	}
	d, err := ProjectDir("/opt/claude/", "/w/my.app")
	if err != nil || d != "/opt/claude/projects/-w-my-app" {
		t.Fatalf("ProjectDir = %q, %v", d, err)
	}
	wd, _ := os.Getwd()
	d, _ = ProjectDir("/c", "")
	if d != filepath.Join("/c/projects", EscapeProjectPath(wd)) {
		t.Fatalf("empty cwd: %q", d)
	}
	d, _ = ProjectDir("/c", "my-project")
	if !strings.Contains(d, "/c/projects/") || !strings.HasSuffix(d, "-my-project") {
		t.Fatalf("relative cwd: %q", d)
	}
}

// Every stream-json line of the real 2.1.330 captures parses, and every
// user/assistant uuid equals a transcript record's uuid.
func TestStreamCaptures(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/corpus/claude-code-2.1.330/*/stream.jsonl")
	if len(dirs) == 0 {
		t.Fatal("no captures")
	}
	for _, sp := range dirs {
		uuids := map[string]bool{}
		_ = filepath.Walk(filepath.Join(filepath.Dir(sp), "transcripts"), func(p string, _ os.FileInfo, _ error) error {
			if strings.HasSuffix(p, ".jsonl") {
				forLines(t, p, func(line []byte) {
					if r, err := Parse(line); err == nil && r.UUID != "" {
						uuids[r.UUID] = true
					}
				})
			}
			return nil
		})
		kinds := map[string]int{}
		forLines(t, sp, func(line []byte) {
			m, err := ParseStream(line)
			if err != nil {
				t.Fatalf("%s: %v", sp, err)
			}
			kinds[m.Type]++
			if m.Record != nil && !uuids[m.UUID] {
				t.Errorf("%s: stream %s uuid %s not in the transcript", sp, m.Type, m.UUID)
			}
			if m.Type == StreamResult && m.Result.Subtype == "" {
				t.Errorf("%s: result without subtype", sp)
			}
		})
		if kinds[StreamResult] == 0 || kinds[StreamAssistant] == 0 {
			t.Errorf("%s: kinds %v", sp, kinds)
		}
	}
}

func TestParseControlMessages(t *testing.T) {
	m, err := ParseStream([]byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"touch x"},"tool_use_id":"toolu_1","agent_id":"a1"}}`))
	if err != nil || m.Control.RequestID != "r1" || m.Subtype != "can_use_tool" || m.Control.Request.ToolName != "Bash" || m.Control.Request.AgentID != "a1" {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = ParseStream([]byte(`{"type":"control_response","response":{"subtype":"success","request_id":"req_interrupt_1","response":{"still_queued":[]}}}`))
	if err != nil || m.Response.Response.RequestID != "req_interrupt_1" || m.Subtype != "success" {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = ParseStream([]byte(`{"type":"brand_new_kind","x":1}`))
	if err != nil || m.Type != "brand_new_kind" {
		t.Fatalf("%+v %v", m, err)
	}
}

func forLines(t *testing.T, path string, fn func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			fn(append([]byte(nil), sc.Bytes()...))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// The single stream-json messages captured from the real CLI 2.1.4 (and
// their forward-compatibility variants) parse without error.
func TestStreamFixturesGleam(t *testing.T) {
	files, _ := filepath.Glob("../testdata/corpus/public/claude-agent-sdk-gleam/test/fixtures/*.json")
	golden, _ := filepath.Glob("../testdata/corpus/public/claude-agent-sdk-gleam/test/fixtures/golden/*.ndjson")
	if len(files) < 15 || len(golden) == 0 {
		t.Fatalf("fixtures missing: %d files", len(files))
	}
	kinds := map[string]int{}
	check := func(p string, line []byte) {
		m, err := ParseStream(line)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return
		}
		kinds[m.Type]++
		if (m.Type == StreamAssistant || m.Type == StreamUser) && m.Record.Message == nil {
			t.Errorf("%s: %s without message", p, m.Type)
		}
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// The single-message fixtures are pretty-printed; a message on the
		// wire is one line.
		var one bytes.Buffer
		if err := json.Compact(&one, data); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if bytes.HasPrefix(one.Bytes(), []byte("{")) {
			check(p, one.Bytes())
		}
	}
	for _, p := range golden {
		forLines(t, p, func(line []byte) { check(p, line) })
	}
	for typ, min := range map[string]int{StreamAssistant: 5, StreamResult: 2, StreamSystem: 2, StreamUser: 1, "future_message_type": 1} {
		if kinds[typ] < min {
			t.Errorf("parsed %d %q messages, want at least %d (all: %v)", kinds[typ], typ, min, kinds)
		}
	}
}

// A record cut short by a crash, with the resumed process's first record
// appended to it on the same line: the whole record is read, not lost with
// the torn one (seen in the crash walk: the app's next prompt vanished from
// replay of the transcript).
func TestParseTornLine(t *testing.T) {
	user := `{"parentUuid":"a2","isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"text","text":"two {\"x\":1}"}]},"uuid":"u2","timestamp":"2026-11-22T18:59:35.149Z"}`
	tests := []struct {
		name, line string
		uuid       string // "" for an error
	}{
		{"torn in a text", `{"parentUuid":"u1","type":"assistant","uuid":"a2","message":{"id":"m","content":[{"type":"text","text":"more 1 xxxx` + user, "u2"},
		{"torn after an escaped quote", `{"type":"assistant","uuid":"a2","message":{"content":[{"type":"text","text":"say \"hi\" {\"` + user, "u2"},
		{"torn between keys", `{"type":"assistant","uuid":"a2",` + user, "u2"},
		{"torn in a tool result", `{"type":"user","uuid":"r1","toolUseResult":{"stdout":"a\nb","structuredPatch":[{"oldStart":1,"lines":["-x` + user, "u2"},
		{"torn, nothing after", `{"type":"assistant","uuid":"a2","message":{"content":[{"type":"text","text":"more 1 xxxx`, ""},
		{"torn, then a torn one", `{"type":"assistant","uuid":"a2","message":{"content":[{"type":"text","text":"more` + `{"type":"user","uuid":"u3","message":{"content":"tw`, ""},
		{"whole", user, "u2"},
		{"empty", "", ""},
		{"one brace", "{", ""},
		{"a start only", `{"`, ""},
		{"starts only", `x{"{"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.line))
			switch {
			case tc.uuid == "" && err == nil:
				t.Fatalf("parsed %+v", r)
			case tc.uuid != "" && err != nil:
				t.Fatal(err)
			case tc.uuid != "" && (r.UUID != tc.uuid || r.Type != TypeUser || r.Message == nil):
				t.Fatalf("record %+v", r)
			}
		})
	}
}

// tornTail's search is bounded: a long line of object starts that never
// parses is given up on, not searched to the end.
func BenchmarkParseTornWorstCase(b *testing.B) {
	line := []byte(`{"type":"assistant","message":` + strings.Repeat(`{"a":`, 100_000))
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := Parse(line); err == nil {
			b.Fatal("parsed")
		}
	}
}

// A Dedupe with Window remembers about the last Window keys, however
// long the session: its keys and its memory stay bounded (a remote CLI
// holds one per session for its scanner and one for remote mode, for as
// long as it runs), and a repeat among the last keys is still caught.
func TestDedupeStaysBounded(t *testing.T) {
	rec := func(i int) *Record {
		return &Record{Type: TypeAssistant, UUID: fmt.Sprintf("u-%d", i), Message: &Message{ID: fmt.Sprintf("msg_%d", i), Content: Content{Raw: []byte(`[{"type":"text","text":"x"}]`)}}}
	}
	d := &Dedupe{Window: DedupeWindow}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	n := 0
	feed := func(records int) {
		for range records {
			if d.Seen(rec(n)) {
				t.Fatalf("record %d seen before", n)
			}
			n++
		}
	}
	feed(DedupeWindow) // warm-up: two keys a record, the window full
	base := heap()
	for round := range 4 {
		feed(DedupeWindow)
		if d.Len() > DedupeWindow {
			t.Fatalf("round %d: %d keys remembered, more than %d", round, d.Len(), DedupeWindow)
		}
		// Keys take 8 bytes: a window's growth is over 128 KB.
		if h := heap(); h > base+DedupeWindow*4 {
			t.Fatalf("round %d: heap %d KB after %d records, %d KB after the warm-up", round, h>>10, n, base>>10)
		}
	}
	// The last DedupeWindow/2 keys are remembered: a record's two keys.
	for _, back := range []int{1, 2, DedupeWindow / 4} {
		if !d.Has(rec(n-back)) || !d.Seen(rec(n-back)) {
			t.Fatalf("the record %d back was not caught again", back)
		}
	}
	runtime.KeepAlive(d)
}
