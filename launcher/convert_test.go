package launcher

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
)

// D18/D19: stream-json's api_retry and compact_boundary become system
// records; a retry printed before the prompt's echo comes after it, as in
// the transcript, and before anything else.
func TestConverterRetriesAndCompaction(t *testing.T) {
	const (
		retry1  = `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":508,"error_status":529,"error":"overloaded","uuid":"r1"}`
		retry2  = `{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1170.5,"error_status":529,"error":"overloaded","uuid":"r2"}`
		echo    = `{"type":"user","message":{"role":"user","content":"hello"},"uuid":"p1","isReplay":true}`
		answer  = `{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"hi"}]},"parent_tool_use_id":null,"uuid":"a1"}`
		cut     = `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"uuid":"i1"}`
		result  = `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]},"uuid":"tr1"}`
		compact = `{"type":"system","subtype":"compact_boundary","uuid":"cb","compact_metadata":{"trigger":"manual","pre_tokens":19,"post_tokens":2544}}`
		other   = `{"type":"system","subtype":"status","status":"compacting","uuid":"s1"}`
	)
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"retries before the prompt's echo", []string{retry1, retry2, echo, answer}, "p1 r1 r2 a1"},
		{"retries before an answer", []string{echo, retry1, answer}, "p1 r1 a1"},
		{"retries before a tool result", []string{retry1, result}, "r1 tr1"},
		{"retries before an interrupt", []string{echo, retry1, cut}, "p1 r1 i1"},
		{"compaction at once", []string{compact, echo}, "cb p1"},
		{"other system messages give nothing", []string{other}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConverter("11111111-2222-4333-8444-555555555555")
			var got []string
			for _, l := range tt.lines {
				m, err := claude.ParseStream([]byte(l))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range c.Convert(m) {
					got = append(got, r.UUID)
					if r.SessionID == "" {
						t.Fatalf("record %s without session", r.UUID)
					}
					switch r.UUID {
					case "r1", "r2":
						if r.Retry == nil || r.Retry.Status != 529 {
							t.Fatalf("retry %+v", r.Retry)
						}
					case "cb":
						if r.Compact == nil || r.Compact.Trigger != "manual" || *r.Compact.PostTokens != 2544 {
							t.Fatalf("compaction %+v", r.Compact)
						}
					}
				}
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Fatalf("got %q, want %q", g, tt.want)
			}
		})
	}
}

// D18: the retries a Claude that writes them late (2.1.197) prints are
// marked late, as replay marks those it reads in that Claude's
// transcript; those of 2.1.330, or of a Claude whose version is not known,
// are not.
func TestConverterMarksLateRetries(t *testing.T) {
	const retry = `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":508,"error_status":529,"error":"overloaded","uuid":"r1"}`
	const echo = `{"type":"user","message":{"role":"user","content":"hello"},"uuid":"p1","isReplay":true}`
	for _, tc := range []struct {
		version string
		late    bool
	}{{"2.1.197", true}, {"2.1.330", false}, {"", false}, {"2.2.0 (Claude Code)", false}} {
		c := NewConverter("11111111-2222-4333-8444-555555555555")
		c.SetClaudeVersion(tc.version)
		var recs []*claude.Record
		for _, l := range []string{retry, echo} {
			m, err := claude.ParseStream([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, c.Convert(m)...)
		}
		if len(recs) != 2 || recs[1].Retry == nil || recs[1].Retry.Late != tc.late {
			t.Fatalf("version %q: records %+v, want the retry late=%v", tc.version, recs, tc.late)
		}
	}
}

// A foreground subagent's prompt: Claude prints it as text blocks after
// task_started; it becomes one string prompt (the sidechain root replay
// reads from the subagent's transcript), never the prompt twice. A
// background subagent's prompt, which Claude does not print, is made from
// task_started.
func TestConverterSubagentPromptOnce(t *testing.T) {
	const (
		launch  = `{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"Agent","input":{"prompt":"count the files","description":"Count"}}]},"parent_tool_use_id":null,"uuid":"a1"}`
		fgStart = `{"type":"system","subtype":"task_started","task_id":"a0123456789abcdef","tool_use_id":"tu1","description":"Count","prompt":"count the files","is_backgrounded":false}`
		bgStart = `{"type":"system","subtype":"task_started","task_id":"a0123456789abcdef","tool_use_id":"tu1","description":"Count","prompt":"count the files","is_backgrounded":true}`
		printed = `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"count the files"}]},"parent_tool_use_id":"tu1","agent_id":"a0123456789abcdef","uuid":"p1"}`
		work    = `{"type":"assistant","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"tu2","name":"Bash","input":{"command":"ls"}}]},"parent_tool_use_id":"tu1","agent_id":"a0123456789abcdef","uuid":"a2"}`
	)
	tests := []struct {
		name  string
		lines []string
		want  string // per record: uuid ("-" none) and "s" when a string prompt
	}{
		{"foreground, prompt printed", []string{launch, fgStart, printed, work}, "a1 p1:s a2"},
		{"background, prompt not printed", []string{launch, bgStart, work}, "a1 -:s a2"},
		{"foreground, prompt not printed", []string{launch, fgStart, work}, "a1 -:s a2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConverter("11111111-2222-4333-8444-555555555555")
			var got []string
			for _, l := range tt.lines {
				m, err := claude.ParseStream([]byte(l))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range c.Convert(m) {
					s := r.UUID
					if s == "" {
						s = "-"
					}
					if r.Type == claude.TypeUser && r.Message.Content.IsString {
						if r.Message.Content.String != "count the files" || r.ParentToolUseID != "tu1" {
							t.Fatalf("prompt %+v", r)
						}
						s += ":s"
					}
					got = append(got, s)
				}
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Fatalf("got %q, want %q", g, tt.want)
			}
		})
	}
}

// The converter keeps the inputs of the last MaxRememberedInputs tool
// calls (not those over maxRememberedInput), for permission requests that
// come without one.
func TestConverterRemembersInputs(t *testing.T) {
	c := NewConverter("11111111-2222-4333-8444-555555555555")
	call := func(id, input string) *claude.Record {
		r, err := claude.Parse([]byte(`{"type":"assistant","uuid":"u-` + id + `","message":{"id":"m","role":"assistant","content":[{"type":"tool_use","id":"` + id + `","name":"ExitPlanMode","input":` + input + `}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	c.NoteInputs(call("t0", `{"plan":"first"}`))
	if got := string(c.Input("t0")); got != `{"plan":"first"}` {
		t.Fatalf("input %q", got)
	}
	for i := 1; i <= MaxRememberedInputs; i++ {
		c.NoteInputs(call("t"+strconv.Itoa(i), `{"n":`+strconv.Itoa(i)+`}`))
	}
	if c.Input("t0") != nil || string(c.Input("t1")) != `{"n":1}` || len(c.inputs) != MaxRememberedInputs || len(c.inputQ) != MaxRememberedInputs {
		t.Fatalf("oldest not forgotten: t0 %q, t1 %q, %d kept", c.Input("t0"), c.Input("t1"), len(c.inputs))
	}
	c.NoteInputs(call("big", `{"plan":"`+strings.Repeat("x", maxRememberedInput)+`"}`))
	if c.Input("big") != nil {
		t.Fatal("an input over the bound was kept")
	}
}

func TestEmptyInput(t *testing.T) {
	for in, want := range map[string]bool{"": true, " ": true, "{}": true, " { } ": true, "null": true,
		`{"plan":"x"}`: false, `[]`: false, `"x"`: false} {
		if got := emptyInput(json.RawMessage(in)); got != want {
			t.Errorf("emptyInput(%q) = %v, want %v", in, got, want)
		}
	}
}
