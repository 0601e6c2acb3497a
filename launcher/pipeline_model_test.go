package launcher

import (
	"context"
	"testing"
)

// The session's model is its main conversation's latest assistant record's:
// replayed records (after a restart) count, Claude Code's own synthetic
// messages and a subagent's records (a model of its own) do not, and a
// change is signalled once per change.
func TestPipelineModel(t *testing.T) {
	asst := func(uuid, model, extra string) string {
		return `{"type":"assistant","uuid":"` + uuid + `"` + extra + `,"message":{"id":"m` + uuid + `","model":"` + model +
			`","content":[{"type":"text","text":"x"}]}}`
	}
	for _, tc := range []struct {
		name     string
		replayed bool
		lines    []string
		want     string
		signal   bool
	}{
		{"none", false, []string{`{"type":"user","uuid":"u1","message":{"content":"hi"}}`}, "", false},
		{"latest", false, []string{asst("a1", "claude-sonnet-4-5", ""), asst("a2", "claude-opus-4-1", "")}, "claude-opus-4-1", true},
		{"replayed", true, []string{asst("a1", "claude-sonnet-4-5", "")}, "claude-sonnet-4-5", true},
		{"synthetic", false, []string{asst("a1", "claude-sonnet-4-5", ""), asst("a2", "<synthetic>", "")}, "claude-sonnet-4-5", true},
		{"sidechain", false, []string{asst("a1", "claude-sonnet-4-5", ""), asst("a2", "claude-haiku-4-5", `,"isSidechain":true`)}, "claude-sonnet-4-5", true},
		{"subagent", false, []string{asst("a1", "claude-sonnet-4-5", ""), asst("a2", "claude-haiku-4-5", `,"agentId":"ab"`)}, "claude-sonnet-4-5", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPipeline("", &MemOutbox{})
			if err := p.Deliver(context.Background(), batch(t, tc.replayed, tc.lines...)); err != nil {
				t.Fatal(err)
			}
			if got := p.Model("s1"); got != tc.want {
				t.Errorf("model %q, want %q", got, tc.want)
			}
			select {
			case <-p.ModelChanged():
				if !tc.signal {
					t.Error("a change signalled without one")
				}
			default:
				if tc.signal {
					t.Error("the change not signalled")
				}
			}
		})
	}
}
