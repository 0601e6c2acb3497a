package replay

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/happybench"
)

// moreSessionsEnv names folders (separated like PATH) whose transcripts of
// at least 1 MB the happy benchmark measures too, beside the corpus's.
const moreSessionsEnv = "CCRELAY_BENCH_SESSIONS"

// largeSessions lists the real sessions of at least 1 MB (their main
// transcript) in the corpus and in the folders $CCRELAY_BENCH_SESSIONS
// names, each once (by name and size).
func largeSessions(tb testing.TB) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		fi, err := os.Stat(p)
		if err != nil || fi.Size() < 1<<20 {
			return
		}
		key := fmt.Sprintf("%s/%d", filepath.Base(p), fi.Size())
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	for _, p := range corpusSessions(tb) {
		add(p)
	}
	for _, dir := range filepath.SplitList(os.Getenv(moreSessionsEnv)) {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "subagents" {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
				add(p)
			}
			return nil
		})
		if err != nil {
			tb.Fatalf("%s: %v", moreSessionsEnv, err)
		}
	}
	if len(out) == 0 {
		tb.Fatal("no real session of 1 MB or more in the corpus")
	}
	return out
}

// buildCcrelay builds the ccrelay binary into dir as a release is built
// (internal/release: pure Go, statically linked, stripped), the binary
// users run: a default go build links it dynamically, and its start then
// costs 1.6 ms more CPU (the dynamic loader, more pages), a tenth of a
// 3 MB session's replay.
func buildCcrelay(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "ccrelay")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, "../cmd/ccrelay")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ccrelay: %v\n%s", err, out)
	}
	return bin
}

// processRun is one whole process's time: wall from start to exit, CPU
// its user and system time.
type processRun struct{ wall, cpu time.Duration }

// runCcrelayReplay runs `ccrelay replay --format jsonl -q file`, output to
// /dev/null, as a user would.
func runCcrelayReplay(tb testing.TB, bin, file string) processRun {
	tb.Helper()
	cmd := exec.Command(bin, "replay", "--format", "jsonl", "-q", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := processRun{wall: time.Since(t0)}
	if err != nil {
		tb.Fatalf("ccrelay replay %s: %v\n%s", file, err, stderr.Bytes())
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r
}

// benchHappy runs, in each iteration, happy's mapper (node, the bundled
// driver) and `ccrelay replay` on file, each a whole process, alternating
// which goes first, and reports ccrelay's speed against happy's as the
// ratio of their median times (the median, because on a shared machine a
// run now and then waits for a core): x-happy by wall time, x-happy-cpu by
// the processes' CPU time (user and system, all threads). Goal for both:
// >= 10.
func benchHappy(b *testing.B, bundle, bin, file string) {
	fi, err := os.Stat(file)
	if err != nil {
		b.Fatal(err)
	}
	var happy, ours []processRun
	runs := 0
	for b.Loop() {
		for k := range 2 {
			if (runs+k)%2 == 0 {
				r, err := happybench.Run(context.Background(), bundle, file, false)
				if err != nil {
					b.Fatal(err)
				}
				if r.Envelopes == 0 {
					b.Fatalf("happy's mapper wrote no envelope for %s: %+v", file, r.Summary)
				}
				happy = append(happy, processRun{r.Wall, r.CPU})
			} else {
				ours = append(ours, runCcrelayReplay(b, bin, file))
			}
		}
		runs++
	}
	hw, hc := medianRun(happy)
	ow, oc := medianRun(ours)
	if ow <= 0 || oc <= 0 {
		return
	}
	mb := float64(fi.Size()) / 1e6
	b.ReportMetric(hw.Seconds()/ow.Seconds(), "x-happy")
	b.ReportMetric(hc.Seconds()/oc.Seconds(), "x-happy-cpu")
	b.ReportMetric(mb/ow.Seconds(), "ccrelay-MB/s")
	b.ReportMetric(mb/hw.Seconds(), "happy-MB/s")
}

// medianRun returns the median wall and the median CPU time of runs.
func medianRun(runs []processRun) (wall, cpu time.Duration) {
	if len(runs) == 0 {
		return 0, 0
	}
	w := make([]time.Duration, len(runs))
	c := make([]time.Duration, len(runs))
	for i, r := range runs {
		w[i], c[i] = r.wall, r.cpu
	}
	slices.Sort(w)
	slices.Sort(c)
	return w[len(w)/2], c[len(c)/2]
}

// BenchmarkMapperHappy reports ccrelay's mapper against happy's unmodified
// TypeScript mapper (internal/happybench), both as whole processes on the
// same file in the same run: `node driver.js FILE` against `ccrelay replay
// FILE > /dev/null`, on every real session of 1 MB or more (the corpus's,
// and those under the folders $CCRELAY_BENCH_SESSIONS names) and on a
// 100 MB mix of every corpus session. ccrelay also reads the subagent transcripts
// beside a session; happy's scanner reads the main one only.
//
//	export CCRELAY_TEST_HAPPY=~/.cache/ccrelay-ci/happy-mapper-2c8ecac
//	go test ./replay -run '^$' -bench 'MapperHappy/[0-9a-f]{8}-' -benchtime 20x -count 3 | benchstat -
//	go test ./replay -run '^$' -bench MapperHappy/mix -benchtime 3x -count 3 | benchstat -
func BenchmarkMapperHappy(b *testing.B) {
	bundle := happybench.Build(b)
	bin := buildCcrelay(b, b.TempDir())
	for _, p := range largeSessions(b) {
		name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		b.Run(name, func(b *testing.B) { benchHappy(b, bundle, bin, p) })
		// The same bytes for both: the main transcript alone, without the
		// subagent transcripts ccrelay would read beside it.
		b.Run(name+"-alone", func(b *testing.B) {
			data, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			alone := filepath.Join(b.TempDir(), filepath.Base(p))
			if err := os.WriteFile(alone, data, 0o644); err != nil {
				b.Fatal(err)
			}
			benchHappy(b, bundle, bin, alone)
		})
	}
	b.Run("mix-100MB", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "mix.jsonl")
		writeMix(b, p, 100<<20)
		benchHappy(b, bundle, bin, p)
	})
}

// The baseline does the real work: on real sessions (the main transcript
// alone, so that both read the same lines) happy's mapper, run by the
// benchmark's driver, finds the turns and tool calls ccrelay's does.
// The known differences are in the texts: ccrelay shows interruptions and
// task notifications as service envelopes where happy shows them as texts,
// and leaves out some texts happy shows; the counts compared here agree.
func TestHappyBaselineMapsLikeCcrelay(t *testing.T) {
	bundle := happybench.Build(t)
	for _, rel := range []string{
		"public/spotter/test/fixtures/transcripts/short.jsonl",
		"public/spotter/test/fixtures/transcripts/tool_heavy.jsonl",
		"public/spotter/test/fixtures/transcripts/subagent.jsonl",
		"public/claude-code-viewer/mock-global-claude-dir/projects/sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
	} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(corpusDir, rel))
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), filepath.Base(rel))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			happy, err := happybench.Run(ctx, bundle, p, false)
			if err != nil {
				t.Fatal(err)
			}
			ours := map[string]int{}
			for _, e := range replayFile(t, p).envs {
				ours[string(e.Ev.T)]++
			}
			for _, k := range []string{"turn-start", "tool-call-start", "tool-call-end"} {
				if happy.Kinds[k] != ours[k] {
					t.Errorf("%s: happy %d, ccrelay %d", k, happy.Kinds[k], ours[k])
				}
			}
			if happy.Kinds["tool-call-start"] == 0 {
				t.Fatalf("no tool call in %s: pick a session with some", rel)
			}
			t.Logf("happy %v, ccrelay %v", happy.Kinds, ours)
		})
	}
}
