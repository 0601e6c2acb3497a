package mapper

import (
	"strings"
	"testing"
)

// Lines as Claude Code 2.1.197 writes them, trimmed: it writes a turn's API
// retries only with the message that follows them, after the answer, the
// API error or the interruption.
const (
	lPrompt   = `{"type":"user","uuid":"p1","timestamp":"2026-01-01T00:00:01Z","version":"2.1.197","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}`
	lRetry1   = `{"parentUuid":"p1","type":"system","subtype":"api_error","level":"error","error":{"message":"529 overloaded","status":529,"formatted":"529 scripted error","connection":null,"isNetworkDown":false,"rateLimits":null},"retryInMs":501.16,"retryAttempt":1,"maxRetries":10,"timestamp":"2026-01-01T00:00:02Z","uuid":"r1","version":"2.1.197"}`
	lRetry2   = `{"parentUuid":"r1","type":"system","subtype":"api_error","level":"error","error":{"message":"529 overloaded","status":529,"formatted":"529 scripted error","connection":null,"isNetworkDown":false,"rateLimits":null},"retryInMs":1041.7,"retryAttempt":2,"maxRetries":10,"timestamp":"2026-01-01T00:00:03Z","uuid":"r2","version":"2.1.197"}`
	lAnswer   = `{"type":"assistant","uuid":"a1","timestamp":"2026-01-01T00:00:04Z","version":"2.1.197","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"after retry"}],"usage":{"input_tokens":12,"output_tokens":7}}}`
	lFailed   = `{"type":"assistant","uuid":"a2","timestamp":"2026-01-01T00:00:04Z","version":"2.1.197","message":{"id":"4b1c","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 529 overloaded"}],"usage":{"input_tokens":0,"output_tokens":0}},"error":"unknown","isApiErrorMessage":true,"apiErrorStatus":529}`
	lCut      = `{"type":"user","uuid":"i1","timestamp":"2026-01-01T00:00:04Z","version":"2.1.197","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}}`
	lPrompt2  = `{"type":"user","uuid":"p2","timestamp":"2026-01-01T00:00:05Z","version":"2.1.197","message":{"role":"user","content":[{"type":"text","text":"again"}]}}`
	lAnswer2  = `{"type":"assistant","uuid":"a3","timestamp":"2026-01-01T00:00:06Z","version":"2.1.197","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"second answer"}],"usage":{"input_tokens":12,"output_tokens":7}}}`
	lStreamR1 = `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":508,"error_status":529,"error":"overloaded","uuid":"s-r1"}`
)

// D18: the retries Claude Code 2.1.197 writes late (after the message that
// followed them) are not shown: after the answer they would read as if
// Claude retried again, and after a turn that failed or was cut they
// opened a turn of their own, which the next prompt closed completed (a
// turn Claude never ran). Retries written as they happen (2.1.330, or a
// version ccrelay cannot read) are shown as before.
func TestLateAPIRetries(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"after the answer", []string{lPrompt, lAnswer, lRetry1, lRetry2, lPrompt2, lAnswer2}, []string{
			"U(hello)", "TS", "A(after retry)[usage]", "TE(completed)", "U(again)", "TS", "A(second answer)[usage]"}},
		{"after the API error", []string{lPrompt, lFailed, lRetry1, lRetry2, lPrompt2, lAnswer2}, []string{
			"U(hello)", "TS", "SVC(API Error: 529 overloaded)[api=529,overloaded,retries=0,retrying=false]", "TE(failed)",
			"U(again)", "TS", "A(second answer)[usage]"}},
		{"after the interruption", []string{lPrompt, lCut, lRetry1, lPrompt2, lAnswer2}, []string{
			"U(hello)", "U(again)", "TS", "A(second answer)[usage]"}},
		{"written as they happen (2.1.330)", []string{lPrompt, v330(lRetry1), v330(lRetry2), lAnswer}, []string{
			"U(hello)", "TS",
			"SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]",
			"SVC(API error 529 (overloaded), retrying: attempt 2 of 10)[api=529,overloaded,retries=2,retrying=true]",
			"A(after retry)[usage]"}},
		{"of no known version", []string{lPrompt, noVersion(lRetry1), lAnswer}, []string{
			"U(hello)", "TS",
			"SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]",
			"A(after retry)[usage]"}},
		{"on stream-json (no version: remote mode marks them)", []string{lPrompt, lStreamR1, lAnswer}, []string{
			"U(hello)", "TS",
			"SVC(API error 529 (overloaded), retrying: attempt 1 of 10)[api=529,overloaded,retries=1,retrying=true]",
			"A(after retry)[usage]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCase(t, tt.lines, tt.want) })
	}
}

func v330(line string) string {
	return strings.Replace(line, `"version":"2.1.197"`, `"version":"2.1.330"`, 1)
}

func noVersion(line string) string { return strings.Replace(line, `,"version":"2.1.197"`, "", 1) }
