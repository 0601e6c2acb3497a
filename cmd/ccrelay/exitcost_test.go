package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exitRuns is how many runs BenchmarkExitAfterClaude measures.
const exitRuns = 20

// exitOverhead runs ccrelay once with a fake Claude that writes a few
// records and exits, and returns how long ccrelay ran after Claude.
func exitOverhead(t testing.TB, r *localRun, args ...string) time.Duration {
	stamp := filepath.Join(r.state, "exit.stamp")
	os.Remove(stamp)
	cmd := r.command(args...)
	cmd.Env = append(cmd.Env, "FAKE_CLAUDE_EXITSTAMP="+stamp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ccrelay: %v\n%s", err, out)
	}
	end := time.Now()
	b, err := os.ReadFile(stamp)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return end.Sub(time.Unix(0, ns))
}

// BenchmarkExitAfterClaude: the time ccrelay takes to exit after Claude
// exits (its last pass over the transcript, closing the turn, the outbox),
// p50 and p99 over exitRuns runs with a fake Claude. The goal is a p99
// under 100 ms.
func BenchmarkExitAfterClaude(b *testing.B) {
	for b.Loop() {
		var took []time.Duration
		for range exitRuns {
			r := newLocalRun(b, recLines(0, 20), nil)
			took = append(took, exitOverhead(b, r))
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// ccrelay exits soon after Claude: no run of exitRuns takes longer than
// exitGoal after Claude's exit.
func TestExitSoonAfterClaude(t *testing.T) {
	const exitGoal = 500 * time.Millisecond // the benchmark's goal (100 ms) with room for a loaded machine
	for i := range exitRuns / 4 {
		r := newLocalRun(t, recLines(0, 20), nil)
		if took := exitOverhead(t, r); took > exitGoal {
			t.Fatalf("run %d: ccrelay exited %s after Claude", i, took)
		}
	}
}
