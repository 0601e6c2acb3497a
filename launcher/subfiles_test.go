package launcher

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/testutil"
)

func subRec(t *testing.T, line string) *claude.Record {
	t.Helper()
	r, err := claude.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A foreground subagent's transcript gives what stdout did not print, in
// the transcript's order, each record once, with the transcript's copy in
// place of what stdout printed; at the end it waits for the final answer;
// a transcript that never appears is waited for once only (SubagentFileWait).
func TestSubFiles(t *testing.T) {
	const (
		prompt   = `{"type":"user","uuid":"u1","agentId":"a1","isSidechain":true,"message":{"role":"user","content":"do it"}}`
		thinking = `{"type":"assistant","uuid":"u2","agentId":"a1","isSidechain":true,"message":{"id":"m1","role":"assistant","stop_reason":"tool_use","content":[{"type":"thinking","thinking":"hm"}]}}`
		call     = `{"type":"assistant","uuid":"u3","agentId":"a1","isSidechain":true,"message":{"id":"m1","role":"assistant","stop_reason":"tool_use","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{}}]}}`
		result   = `{"type":"user","uuid":"u4","agentId":"a1","isSidechain":true,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"ok"}]}}`
		final    = `{"type":"assistant","uuid":"u5","agentId":"a1","isSidechain":true,"message":{"id":"m2","role":"assistant","stop_reason":"end_turn","content":[{"type":"text","text":"done"}]}}`
		printed  = `{"type":"assistant","uuid":"u3","parent_tool_use_id":"tA","message":{"id":"m1","role":"assistant","stop_reason":null,"content":[{"type":"tool_use","id":"t2","name":"Bash","input":{}}]}}`
		printedR = `{"type":"user","uuid":"u4","parent_tool_use_id":"tA","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"ok"}]}}`
	)
	project := t.TempDir()
	session := "11111111-2222-4333-8444-555555555555"
	dir := claude.SubagentDir(project, session)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent-a1.jsonl")
	write := func(lines ...string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	uuids := func(rs []*claude.Record) string {
		var s []string
		for _, r := range rs {
			if r.ParentToolUseID != "tA" || !r.IsSidechain || r.AgentID != "a1" {
				t.Fatalf("record %s not adopted: %+v", r.UUID, r)
			}
			s = append(s, r.UUID)
		}
		return strings.Join(s, " ")
	}
	s := newSubFiles(project, session, SubagentFileWait, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.started("tA", "a1")
	write(prompt, thinking, call)
	prior, self := s.before(subRec(t, printed))
	if got := uuids(prior); got != "u1 u2" {
		t.Fatalf("before the call: %q", got)
	}
	if self == nil || string(self.Raw) != call {
		t.Fatalf("the call is not the transcript's copy: %+v", self)
	}
	if prior, self := s.before(subRec(t, printed)); len(prior) != 0 || self != nil {
		t.Fatalf("the call twice: %v %v", prior, self)
	}
	// The final answer is written later, while ended waits for it.
	write(result)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		write(final) // while ended may already wait for it
	}()
	defer func() { <-wrote }()
	prior, self = s.before(subRec(t, printedR))
	if len(prior) != 0 || self == nil || self.UUID != "u4" {
		t.Fatalf("the result: %v %+v", prior, self)
	}
	if got := uuids(s.ended("tA")); got != "u5" {
		t.Fatalf("at the end: %q", got)
	}
	if s.ended("tA") != nil {
		t.Fatal("ended twice")
	}

	// A transcript that never appears costs one wait, not one per line.
	s = newSubFiles(project, session, 50*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.started("tB", "a-missing")
	begin := time.Now()
	if _, self := s.before(subRec(t, strings.Replace(printed, "tA", "tB", 1))); self == nil {
		t.Fatal("stdout's record lost")
	}
	if time.Since(begin) < 50*time.Millisecond {
		t.Fatal("did not wait for the transcript")
	}
	begin = time.Now()
	for i := range 10 {
		line := strings.Replace(strings.Replace(printedR, "tA", "tB", 1), `"u4"`, fmt.Sprintf(`"v%d"`, i), 1)
		if _, self := s.before(subRec(t, line)); self == nil {
			t.Fatal("stdout's record lost")
		}
	}
	if d := time.Since(begin); d > 40*time.Millisecond {
		t.Fatalf("waited again for a missing transcript: %v", d)
	}
}

// Remote mode reads the transcript of a foreground subagent only: a Bash
// call's task_started (a background subagent's Bash prints one with
// owned_by_subagent and is_backgrounded false, as a long foreground Bash of
// the main agent does) has no agent-<id>.jsonl, and its end is not held
// waiting for one.
func TestRemoteFollowsSubagentTasksOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started map[string]any
		follows bool
	}{
		{"foreground subagent", map[string]any{"task_type": "local_agent", "is_backgrounded": false}, true},
		{"foreground subagent, no task type", map[string]any{"is_backgrounded": false}, true},
		{"background subagent", map[string]any{"task_type": "local_agent", "is_backgrounded": true}, false},
		{"a background subagent's Bash", map[string]any{"task_type": "local_bash", "owned_by_subagent": true, "is_backgrounded": false}, false},
		{"the main agent's foreground Bash", map[string]any{"task_type": "local_bash", "owned_by_subagent": false, "is_backgrounded": false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			project := t.TempDir()
			r := NewRemote("11111111-2222-4333-8444-555555555555", RemoteOptions{ProjectDir: project, Clock: &testutil.FakeClock{},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, NewPipeline("", &MemOutbox{}), &events{})
			started := map[string]any{"type": "system", "subtype": "task_started", "task_id": "b0123456789abcdef", "tool_use_id": "toolu_T", "description": "d"}
			for k, v := range tc.started {
				started[k] = v
			}
			if extra, skip := r.subagentRecords(streamLine(t, started)); len(extra) != 0 || skip {
				t.Fatalf("task_started gave %d records, skip %v", len(extra), skip)
			}
			if got := r.files.follows("toolu_T"); got != tc.follows {
				t.Fatalf("follows the task's transcript: %v, want %v", got, tc.follows)
			}
			if tc.follows {
				return
			}
			// The task ends: nothing is waited for.
			begin := time.Now()
			r.subagentRecords(streamLine(t, map[string]any{"type": "system", "subtype": "task_updated", "task_id": "b0123456789abcdef", "patch": map[string]any{"status": "completed"}}))
			r.subagentRecords(streamLine(t, map[string]any{"type": "system", "subtype": "task_notification", "task_id": "b0123456789abcdef", "tool_use_id": "toolu_T", "status": "completed"}))
			if d := time.Since(begin); d >= SubagentFileWait {
				t.Fatalf("the task's end waited %v for a transcript", d)
			}
			t.Logf("the task's end took %v", time.Since(begin))
		})
	}
}
