package scanner

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ccrelay/ccrelay/internal/synth"
)

const corpus = "../testdata/corpus"

// countSink counts what it is given and keeps nothing.
type countSink struct{ n, batches, maxBatch atomic.Int64 }

func (c *countSink) Deliver(_ context.Context, b Batch) error {
	c.n.Add(int64(len(b.Records)))
	c.batches.Add(1)
	if n := int64(len(b.Records)); n > c.maxBatch.Load() {
		c.maxBatch.Store(n)
	}
	return nil
}

// writeSynth writes a synthetic transcript of at least size bytes made of
// copies of corpus sessions (internal/synth).
func writeSynth(tb testing.TB, path string, size int64) {
	tb.Helper()
	var sources []synth.Source
	for _, p := range []string{
		"/public/spotter/test/fixtures/transcripts/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
		"/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl",
		"/public/claude-code-log/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
		"/claude-code-2.1.330/agent-background/transcripts/-home-dev-project/fc141a3b-db42-42fd-b003-09c712c8bbfd.jsonl",
	} {
		s, err := synth.Load(corpus + p)
		if err != nil {
			tb.Fatal(err)
		}
		sources = append(sources, s)
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := synth.Write(f, size, sources...); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// peakRSS returns the peak resident set size (VmHWM) in bytes; resetPeak
// starts a new peak from the current RSS (Linux).
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			if f := bytes.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func resetPeak() {
	runtime.GC()
	debug.FreeOSMemory()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// BenchmarkResumeMemory follows a session whose transcript already holds
// 200 MB (`ccrelay -- --resume` of a long session): the whole backlog goes
// to the sink. It reports the peak RSS of the process and the largest
// batch; the goal is a peak under 64 MB.
func BenchmarkResumeMemory(b *testing.B) {
	dir := b.TempDir()
	main := filepath.Join(dir, "s.jsonl")
	writeSynth(b, main, 200<<20)
	var peak, maxBatch int64
	for range b.N {
		resetPeak()
		sink := &countSink{}
		sc, err := New(Config{ProjectDir: dir, NoWatch: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sc.Run(ctx) }()
		sc.AddSession("s")
		<-sc.Synced() // a pass before the announcement
		<-sc.Synced() // the pass that read the backlog
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if sink.n.Load() == 0 {
			b.Fatal("nothing delivered")
		}
		peak = max(peak, peakRSS())
		maxBatch = max(maxBatch, sink.maxBatch.Load())
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MB")
	b.ReportMetric(float64(maxBatch), "max-batch-records")
}
