package claude

import (
	"reflect"
	"testing"
)

// API errors, retries and compaction boundaries as Claude Code 2.1.330
// writes them (transcript lines) and prints them (stream-json lines),
// trimmed to the keys that matter.
func TestParseAPIErrorsRetriesCompaction(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	tests := []struct {
		name       string
		line       string
		apiError   bool
		status     int64
		retry      *APIRetry
		compact    *CompactBoundary
		wantSubtyp string
	}{
		{"transcript retry", `{"parentUuid":"p","isSidechain":false,"type":"system","subtype":"api_error","level":"error","error":{"message":"529 {\"error\":{}}","status":529,"formatted":"529 scripted error","connection":null},"retryInMs":508,"retryAttempt":1,"maxRetries":10,"source":"request_retry","uuid":"u1"}`,
			false, 0, &APIRetry{Attempt: 1, MaxRetries: 10, RetryInMs: 508, Status: 529}, nil, SubtypeAPIError},
		{"stream-json retry", `{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1170,"error_status":500,"error":"server_error","session_id":"s","uuid":"u2"}`,
			false, 500, &APIRetry{Attempt: 2, MaxRetries: 10, RetryInMs: 1170, Status: 500}, nil, SubtypeAPIRetry},
		{"api_error without a retry", `{"type":"system","subtype":"api_error","error":{"status":400},"uuid":"u3"}`,
			false, 0, nil, nil, SubtypeAPIError},
		{"transcript final error", `{"type":"assistant","uuid":"u4","message":{"id":"b51d","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 400 scripted error"}]},"error":"unknown","isApiErrorMessage":true,"apiErrorStatus":400,"apiErrorType":"api_error"}`,
			true, 400, nil, nil, ""},
		{"stream-json final error", `{"type":"assistant","message":{"id":"b51d","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 400 scripted error"}]},"parent_tool_use_id":null,"uuid":"u4","error":"unknown","is_api_error_message":true,"api_error_status":400,"api_error_type":"api_error"}`,
			true, 400, nil, nil, ""},
		{"stream-json final error of 2.1.197 (no flag)", `{"type":"assistant","message":{"id":"4c98","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 400 scripted error"}]},"parent_tool_use_id":null,"uuid":"u4","error":"unknown"}`,
			true, 0, nil, nil, ""},
		{"a synthetic message that is no error", `{"type":"assistant","uuid":"u7","message":{"id":"451d","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"No response requested."}]},"isApiErrorMessage":false}`,
			false, 0, nil, nil, ""},
		{"the flag says no error", `{"type":"assistant","uuid":"u7","message":{"model":"<synthetic>","content":[]},"error":"unknown","isApiErrorMessage":false}`,
			false, 0, nil, nil, ""},
		{"an error string on a model's message", `{"type":"assistant","uuid":"u8","message":{"model":"claude-opus-5-5","content":[]},"error":"unknown"}`,
			false, 0, nil, nil, ""},
		{"transcript compaction", `{"parentUuid":null,"logicalParentUuid":"b3","type":"system","subtype":"compact_boundary","content":"Conversation compacted","isMeta":false,"uuid":"u5","level":"info","compactMetadata":{"trigger":"manual","preTokens":19,"durationMs":71,"postTokens":2544}}`,
			false, 0, nil, &CompactBoundary{Trigger: "manual", PreTokens: n(19), PostTokens: n(2544)}, SubtypeCompactBoundary},
		{"stream-json compaction", `{"type":"system","subtype":"compact_boundary","uuid":"u5","compact_metadata":{"trigger":"auto","pre_tokens":190000,"cumulative_dropped_tokens":0},"logical_parent_uuid":"b3"}`,
			false, 0, nil, &CompactBoundary{Trigger: "auto", PreTokens: n(190000)}, SubtypeCompactBoundary},
		{"compaction without metadata", `{"type":"system","subtype":"compact_boundary","uuid":"u6"}`,
			false, 0, nil, &CompactBoundary{}, SubtypeCompactBoundary},
		{"bad numbers are ignored", `{"type":"system","subtype":"api_retry","attempt":"x","max_retries":-3,"error_status":1e400}`,
			false, 0, nil, nil, SubtypeAPIRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if r.Subtype != tt.wantSubtyp || r.IsAPIError != tt.apiError || r.APIErrorStatus != tt.status {
				t.Fatalf("subtype %q apiError %v status %d, want %q %v %d", r.Subtype, r.IsAPIError, r.APIErrorStatus, tt.wantSubtyp, tt.apiError, tt.status)
			}
			if !reflect.DeepEqual(r.Retry, tt.retry) {
				t.Fatalf("retry %+v, want %+v", r.Retry, tt.retry)
			}
			if !reflect.DeepEqual(r.Compact, tt.compact) {
				t.Fatalf("compact %+v, want %+v", r.Compact, tt.compact)
			}
		})
	}
}

func TestParseFileEdit(t *testing.T) {
	tests := []struct {
		raw  string
		ok   bool
		path string
	}{
		{`{"filePath":"/p/a","oldString":"a","originalFile":"a\n\"big\"\n","structuredPatch":[{"oldStart":1,"lines":["-a"]}]}`, true, "/p/a"},
		{`{"type":"create","filePath":"/p/c","content":"x\ny","structuredPatch":[]}`, true, "/p/c"},
		{`{"filePath":"/p/a"}`, false, "/p/a"},
		{`{"structuredPatch":[]}`, false, ""},
		{`{"filePath":"/p/a","structuredPatch":"no"}`, false, "/p/a"},
		{`"Error: not found"`, false, ""},
		{`{"filePath":"/p/a","structuredPatch":[`, false, "/p/a"},
	}
	for _, tt := range tests {
		fe, ok := ParseFileEdit([]byte(tt.raw))
		if ok != tt.ok || (ok && fe.FilePath != tt.path) {
			t.Errorf("ParseFileEdit(%s) = %+v, %v", tt.raw, fe, ok)
		}
	}
	fe, _ := ParseFileEdit([]byte(`{"type":"create","filePath":"/p/c","content":"x\ny","structuredPatch":[]}`))
	if fe.Type != "create" || fe.Content == nil || *fe.Content != "x\ny" || string(fe.Patch) != "[]" {
		t.Fatalf("%+v", fe)
	}
}
