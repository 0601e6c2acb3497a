package mapper

import (
	"testing"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/protocol"
)

const testSession = "sess-1"

// rec parses a JSON record line or fails the test.
func rec(t testing.TB, line string) *claude.Record {
	t.Helper()
	r, err := claude.Parse([]byte(line))
	if err != nil {
		t.Fatalf("parse %s: %v", line, err)
	}
	return r
}

// sub is the session subagent id of a provider tool id, as shown by describe.
func sub(provider string) string { return protocol.SubagentID(provider) }

// runCase maps lines through a fresh mapper, checks the invariants and
// compares the described output with want.
func runCase(t *testing.T, lines, want []string) {
	t.Helper()
	m := New(testSession)
	var envs []protocol.Envelope
	for _, l := range lines {
		envs = append(envs, m.Map(rec(t, l))...)
	}
	checkInvariants(t, envs)
	eq(t, describeAll(envs), want...)
}

// feed maps lines through m and returns the described output.
func feed(t testing.TB, m *Mapper, lines ...string) []string {
	t.Helper()
	var out []protocol.Envelope
	for _, l := range lines {
		out = append(out, m.Map(rec(t, l))...)
	}
	return describeAll(out)
}

var (
	describe        = envtest.Describe
	describeAll     = envtest.DescribeAll
	checkInvariants = envtest.CheckInvariants
	eq              = envtest.Eq
)
