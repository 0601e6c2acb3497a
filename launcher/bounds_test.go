package launcher

import (
	"fmt"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/protocol"
)

// A converter lives as long as its Claude: 10,000 tool calls (and Agent
// launches) leave it remembering at most MaxConverterCalls calls and
// MaxConverterAgents launches, and it still knows the recent ones: their
// parents, and which are open when a turn is cut.
func TestConverterBounded(t *testing.T) {
	c := NewConverter("11111111-2222-4333-8444-555555555555")
	convert := func(line string) []*claude.Record {
		t.Helper()
		m, err := claude.ParseStream([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return c.Convert(m)
	}
	const n = 10_000
	for i := range n {
		name := "Read"
		if i%3 == 0 {
			name = "Agent"
		}
		convert(fmt.Sprintf(`{"type":"assistant","message":{"id":"m%d","role":"assistant","content":[{"type":"tool_use","id":"t%d","name":%q,"input":{"prompt":"p"}}]},"parent_tool_use_id":"agent-x","uuid":"a%d"}`, i, i, name, i))
		if i < n-2 { // the last two stay open
			convert(fmt.Sprintf(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"x"}]},"parent_tool_use_id":"agent-x","uuid":"r%d"}`, i, i))
		}
	}
	if len(c.parents) > MaxConverterCalls || len(c.parentQ) > MaxConverterCalls || len(c.open) > MaxConverterCalls ||
		len(c.order) > 2*len(c.open)+64 || len(c.agents) > MaxConverterAgents || len(c.agentQ) > MaxConverterAgents {
		t.Fatalf("parents %d/%d open %d order %d agents %d/%d", len(c.parents), len(c.parentQ), len(c.open), len(c.order), len(c.agents), len(c.agentQ))
	}
	if c.Parent(fmt.Sprintf("t%d", n-1)) != "agent-x" {
		t.Fatal("the latest call's parent is forgotten")
	}
	cut := convert(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"uuid":"i1"}`)
	if len(cut) != 3 { // two interrupted results and the marker
		t.Fatalf("cut gives %d records, want 3", len(cut))
	}
	// Open calls beyond the bound: the oldest are forgotten.
	for i := range MaxConverterCalls + 100 {
		convert(fmt.Sprintf(`{"type":"assistant","message":{"id":"o%d","role":"assistant","content":[{"type":"tool_use","id":"o%d","name":"Read","input":{}}]},"uuid":"b%d"}`, i, i, i))
	}
	if len(c.open) != MaxConverterCalls || len(c.order) > 2*len(c.open)+64 {
		t.Fatalf("open %d order %d", len(c.open), len(c.order))
	}
}

// The loop's memory of command ids is bounded (repeats older than that
// are the ledger's to answer); a recent repeat is still dropped.
func TestLoopSeenBounded(t *testing.T) {
	l := &loop{seen: map[string]bool{}}
	for i := range 3 * MaxSeenCommands {
		if !l.fresh(Command{Command: protocol.Command{ID: fmt.Sprintf("c%d", i)}}) {
			t.Fatalf("command %d not fresh", i)
		}
	}
	if len(l.seen) > MaxSeenCommands || len(l.seenQ) > MaxSeenCommands {
		t.Fatalf("seen %d/%d", len(l.seen), len(l.seenQ))
	}
	if l.fresh(Command{Command: protocol.Command{ID: fmt.Sprintf("c%d", 3*MaxSeenCommands-1)}}) {
		t.Fatal("a recent repeat is fresh")
	}
}
