package mapper

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// Lines as Claude Code 2.1.330 writes them (transcript) and prints them
// (stream-json), trimmed.
const (
	fPrompt       = `{"type":"user","uuid":"p1","timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":"hello"}}`
	fRetry1       = `{"type":"system","subtype":"api_error","uuid":"t-r1","timestamp":"2026-01-01T00:00:02Z","error":{"status":529,"formatted":"529 overloaded"},"retryInMs":508,"retryAttempt":1,"maxRetries":10}`
	fRetry2       = `{"type":"system","subtype":"api_error","uuid":"t-r2","timestamp":"2026-01-01T00:00:03Z","error":{"status":529,"formatted":"529 overloaded"},"retryInMs":1170,"retryAttempt":2,"maxRetries":10}`
	fStreamRetry1 = `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":508,"error_status":529,"error":"overloaded","uuid":"s-r1"}`
	fStreamRetry2 = `{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1170,"error_status":529,"error":"overloaded","uuid":"s-r2"}`
	fAnswer       = `{"type":"assistant","uuid":"a1","timestamp":"2026-01-01T00:00:04Z","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"after retry"}],"usage":{"input_tokens":12,"output_tokens":7}}}`
	fFailed       = `{"type":"assistant","uuid":"a2","timestamp":"2026-01-01T00:00:04Z","message":{"id":"4b1c","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 529 overloaded"}],"usage":{"input_tokens":0,"output_tokens":0}},"error":"unknown","isApiErrorMessage":true,"apiErrorStatus":529}`
	fStreamFailed = `{"type":"assistant","uuid":"a2","message":{"id":"4b1c","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 529 overloaded"}],"usage":{"input_tokens":0,"output_tokens":0}},"error":"unknown","is_api_error_message":true,"api_error_status":529}`
)

// D18: retries leave a trace, a turn that ends on an API error ends failed
// with the error as a service envelope, and transcript and stream-json give
// the same ids.
func TestAPIErrors(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"retries then success", []string{fPrompt, fRetry1, fRetry2, fAnswer}, []string{
			"U(hello)", "TS",
			"SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]",
			"SVC(API error 529 (overloaded), retrying: attempt 2 of 10)[api=529,overloaded,retries=2,retrying=true]",
			"A(after retry)[usage]"}},
		{"retries then failure", []string{fPrompt, fRetry1, fRetry2, fFailed}, []string{
			"U(hello)", "TS",
			"SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]",
			"SVC(API error 529 (overloaded), retrying: attempt 2 of 10)[api=529,overloaded,retries=2,retrying=true]",
			"SVC(API Error: 529 overloaded)[api=529,overloaded,retries=2,retrying=false]", "TE(failed)"}},
		{"failure without retries (400)", []string{fPrompt,
			`{"type":"assistant","uuid":"a3","message":{"id":"x","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 400 prompt is too long"}]},"isApiErrorMessage":true,"apiErrorStatus":400}`}, []string{
			"U(hello)", "TS", "SVC(API Error: 400 prompt is too long)[api=400,prompt is too long,retries=0,retrying=false]", "TE(failed)"}},
		{"status only in the text", []string{fPrompt,
			`{"type":"assistant","uuid":"a3","message":{"id":"x","role":"assistant","content":[{"type":"text","text":"API Error: 500 boom"}]},"isApiErrorMessage":true}`}, []string{
			"U(hello)", "TS", "SVC(API Error: 500 boom)[api=500,boom,retries=0,retrying=false]", "TE(failed)"}},
		{"connection error", []string{fPrompt,
			`{"type":"system","subtype":"api_error","uuid":"r","error":{"status":null},"retryAttempt":1,"maxRetries":1}`,
			`{"type":"assistant","uuid":"a3","message":{"id":"x","role":"assistant","content":[{"type":"text","text":"API Error: Connection error."}]},"isApiErrorMessage":true}`}, []string{
			"U(hello)", "TS", "SVC(API connection error (no response), retrying: attempt 1 of 1)[api=0,no response,retries=1,retrying=true]",
			"SVC(API Error: Connection error.)[api=0,Connection error.,retries=1,retrying=false]", "TE(failed)"}},
		{"retries are counted per turn", []string{fPrompt, fRetry1, fAnswer,
			`{"type":"user","uuid":"p2","message":{"role":"user","content":"again"}}`, fRetry1}, []string{
			"U(hello)", "TS", "SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]", "A(after retry)[usage]",
			"TE(completed)", "U(again)", "TS", "SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]"}},
		{"api_error that is no retry is skipped", []string{fPrompt, `{"type":"system","subtype":"api_error","uuid":"r","error":{"status":400}}`, fAnswer}, []string{
			"U(hello)", "TS", "A(after retry)[usage]"}},
		{"a subagent's API error ends the subagent, not the turn", []string{fPrompt,
			`{"type":"assistant","uuid":"l1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_T","name":"Task","input":{"description":"Helper","prompt":"help"}}]}}`,
			`{"type":"user","uuid":"s1","isSidechain":true,"parent_tool_use_id":"toolu_T","message":{"role":"user","content":"help"}}`,
			`{"type":"assistant","uuid":"s2","isSidechain":true,"parent_tool_use_id":"toolu_T","message":{"id":"x","role":"assistant","content":[{"type":"text","text":"API Error: 500 boom"}]},"isApiErrorMessage":true,"apiErrorStatus":500}`,
			fAnswer}, []string{
			"U(hello)", "TS", "S(Helper)[sub=" + sub("toolu_T") + "]", "A(help)[sub=" + sub("toolu_T") + "]",
			"SVC(API Error: 500 boom)[sub=" + sub("toolu_T") + "][api=500,boom,retries=0,retrying=false]", "A(after retry)[usage]"}},
		// max_tokens: Claude continues on its own with an isMeta prompt;
		// the turn goes on and ends completed.
		{"max_tokens auto-continue stays one turn", []string{fPrompt,
			`{"type":"assistant","uuid":"m1","message":{"id":"msg_1","role":"assistant","stop_reason":"max_tokens","content":[{"type":"text","text":"part one"}]}}`,
			`{"type":"user","uuid":"m2","isMeta":true,"turnCompanion":true,"message":{"role":"user","content":"Output token limit hit. Resume directly"}}`,
			`{"type":"assistant","uuid":"m3","message":{"id":"msg_2","role":"assistant","stop_reason":"end_turn","content":[{"type":"text","text":"part two"}]}}`,
			`{"type":"system","subtype":"turn_duration","uuid":"d"}`}, []string{
			"U(hello)", "TS", "A(part one)", "A(part two)", "TE(completed)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCase(t, tt.lines, tt.want) })
	}

	// Transcript and stream-json: the same envelopes, the same ids.
	for _, end := range [][2]string{{fAnswer, fAnswer}, {fFailed, fStreamFailed}} {
		a, b := New(testSession), New(testSession)
		var ea, eb []protocol.Envelope
		for _, l := range []string{fPrompt, fRetry1, fRetry2, end[0]} {
			ea = append(ea, a.Map(rec(t, l))...)
		}
		for _, l := range []string{fPrompt, fStreamRetry1, fStreamRetry2, end[1]} {
			eb = append(eb, b.Map(rec(t, l))...)
		}
		if len(ea) != len(eb) {
			t.Fatalf("transcript %v, stream %v", describeAll(ea), describeAll(eb))
		}
		for i := range ea {
			if ea[i].ID != eb[i].ID || ea[i].Turn != eb[i].Turn || describe(ea[i]) != describe(eb[i]) {
				t.Fatalf("envelope %d: transcript %s %s, stream %s %s", i, describe(ea[i]), ea[i].ID, describe(eb[i]), eb[i].ID)
			}
		}
	}
}

// D19: a compaction boundary is a service envelope with the token counts;
// a slash command is the user's prompt as typed, marked as a command.
func TestCompactionAndCommands(t *testing.T) {
	boundary := `{"type":"system","subtype":"compact_boundary","content":"Conversation compacted","uuid":"cb","timestamp":"2026-01-01T00:00:05Z","compactMetadata":{"trigger":"manual","preTokens":19,"postTokens":2544}}`
	summary := `{"type":"user","uuid":"cs","isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"role":"user","content":"This session is being continued from a previous conversation"}}`
	caveat := `{"type":"user","uuid":"cv","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>The command below was run directly</local-command-caveat>"}}`
	command := `{"type":"user","uuid":"cn","message":{"role":"user","content":"<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args>keep it short</command-args>"}}`
	stdout := `{"type":"user","uuid":"co","message":{"role":"user","content":"<local-command-stdout>Compacted </local-command-stdout>"}}`
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"manual /compact as 2.1.330 writes it", []string{fPrompt, fAnswer, boundary, summary, caveat, command, stdout}, []string{
			"U(hello)", "TS", "A(after retry)[usage]", "TE(completed)",
			"TS", "SVC(Conversation compacted (19 tokens before, 2544 after))[compaction=manual,pre=19,post=2544]",
			"TE(completed)", "U(/compact keep it short)[cmd=/compact|keep it short]"}},
		{"automatic compaction mid-turn", []string{fPrompt,
			`{"type":"system","subtype":"compact_boundary","uuid":"cb","compact_metadata":{"trigger":"auto","pre_tokens":190000}}`, summary, fAnswer}, []string{
			"U(hello)", "TS", "SVC(Conversation compacted (190000 tokens before))[compaction=auto,pre=190000]", "A(after retry)[usage]"}},
		{"boundary without metadata opens a turn", []string{`{"type":"system","subtype":"compact_boundary","uuid":"cb"}`}, []string{
			"TS", "SVC(Conversation compacted)[compaction=]"}},
		{"command in text blocks, older order of tags", []string{
			`{"type":"user","uuid":"c2","message":{"role":"user","content":[{"type":"text","text":"<command-message>review is running…</command-message>\n<command-name>/review</command-name>"}]}}`}, []string{
			"U(/review)[cmd=/review|]"}},
		{"empty command name stays text", []string{`{"type":"user","uuid":"c3","message":{"role":"user","content":"<command-name></command-name>"}}`}, []string{
			"U(<command-name></command-name>)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCase(t, tt.lines, tt.want) })
	}
}

func editResult(tur string) string {
	return `{"type":"user","uuid":"r1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_E","content":"ok"}]},"toolUseResult":` + tur + `}`
}

// D20: Edit/Write results carry the structured patch, create or update,
// bounded.
func TestEditDiffs(t *testing.T) {
	call := `{"type":"assistant","uuid":"c1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_E","name":"Edit","input":{}}]}}`
	long := strings.Repeat("x", protocol.MaxDiffLineBytes+10)
	many := make([]string, protocol.MaxDiffLines+5)
	for i := range many {
		many[i] = "+l"
	}
	manyJSON, _ := json.Marshal(many)
	hunks := make([]string, protocol.MaxDiffHunks+1)
	for i := range hunks {
		hunks[i] = `{"oldStart":1,"oldLines":1,"newStart":1,"newLines":1,"lines":["-a","+b"]}`
	}
	tests := []struct {
		name string
		tur  string
		want string
	}{
		{"Edit (2.1.330)", `{"filePath":"/p/a.txt","oldString":"a.txt","newString":"A line\nsecond","originalFile":"a.txt\n","structuredPatch":[{"oldStart":1,"oldLines":1,"newStart":1,"newLines":2,"lines":["-a.txt","+A line","+second"]}],"userModified":false,"replaceAll":false}`,
			"TCE(toolu_E)[result=ok][diff=update,/p/a.txt,@@-1,1+1,2:3]"},
		{"Write create (2.1.330)", `{"type":"create","filePath":"/p/c.txt","content":"new file\nline 2\n","structuredPatch":[],"originalFile":null,"userModified":false}`,
			"TCE(toolu_E)[result=ok][diff=create,/p/c.txt,@@-0,0+1,2:2]"},
		{"Write update (2.1.330)", `{"type":"update","filePath":"/p/b.txt","content":"b rewritten\n","structuredPatch":[{"oldStart":1,"oldLines":1,"newStart":1,"newLines":1,"lines":["-b.txt","+b rewritten"]}],"originalFile":"b.txt\n"}`,
			"TCE(toolu_E)[result=ok][diff=update,/p/b.txt,@@-1,1+1,1:2]"},
		{"Write of an empty file", `{"type":"create","filePath":"/p/e.txt","content":"","structuredPatch":[]}`,
			"TCE(toolu_E)[result=ok][diff=create,/p/e.txt]"},
		{"a long line is cut", `{"filePath":"/p/a","structuredPatch":[{"oldStart":1,"oldLines":0,"newStart":1,"newLines":1,"lines":["+` + long + `"]}]}`,
			"TCE(toolu_E)[result=ok][diff=update,/p/a,@@-1,0+1,1:1,truncated]"},
		{"too many lines", `{"filePath":"/p/a","structuredPatch":[{"oldStart":0,"oldLines":0,"newStart":1,"newLines":1005,"lines":` + string(manyJSON) + `}]}`,
			"TCE(toolu_E)[result=ok][diff=update,/p/a,@@-0,0+1,1005:1000,truncated]"},
		{"too many hunks", `{"filePath":"/p/a","structuredPatch":[` + strings.Join(hunks, ",") + `]}`,
			"TCE(toolu_E)[result=ok][diff=update,/p/a" + strings.Repeat(",@@-1,1+1,1:2", protocol.MaxDiffHunks) + ",truncated]"},
		{"too many bytes", `{"filePath":"/p/a","structuredPatch":[{"oldStart":0,"oldLines":0,"newStart":1,"newLines":40,"lines":["` + strings.Repeat(`+`+strings.Repeat("y", protocol.MaxDiffLineBytes-1)+`","`, 39) + `+y"]}]}`,
			"TCE(toolu_E)[result=ok][diff=update,/p/a,@@-0,0+1,40:32,truncated]"},
		{"not an edit", `{"stdout":"a.txt","stderr":""}`, "TCE(toolu_E)[result=ok]"},
		{"no file path", `{"structuredPatch":[]}`, "TCE(toolu_E)[result=ok]"},
		{"malformed patch", `{"filePath":"/p/a","structuredPatch":[{"lines":[1]}]}`, "TCE(toolu_E)[result=ok]"},
		{"error result as a string", `"Error: String to replace not found"`, "TCE(toolu_E)[result=ok]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(testSession)
			var envs []protocol.Envelope
			for _, l := range []string{fPrompt, call, editResult(tt.tur)} {
				envs = append(envs, m.Map(rec(t, l))...)
			}
			checkInvariants(t, envs)
			got := describe(envs[len(envs)-1])
			if got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if d := envs[len(envs)-1].Ev.Diff; d != nil && d.Hunks != nil && d.Hunks[0].Lines != nil {
				for _, l := range d.Hunks[0].Lines {
					if len(l) > protocol.MaxDiffLineBytes {
						t.Fatalf("line of %d bytes", len(l))
					}
				}
			}
		})
	}
}
