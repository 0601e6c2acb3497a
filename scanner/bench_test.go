package scanner

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

type chanSink chan Record

func (c chanSink) Deliver(_ context.Context, b Batch) error {
	for _, r := range b.Records {
		c <- r
	}
	return nil
}

// BenchmarkAppendLatency measures the time from a line's write to its record
// reaching the sink, on transcripts of 1 MB and 100 MB, with fsnotify and
// with polling alone. The per-append cost must not grow with the file.
func BenchmarkAppendLatency(b *testing.B) {
	for _, size := range []int64{1 << 20, 100 << 20} {
		for _, mode := range []string{"fsnotify", "poll", "fsnotify+cursor"} {
			b.Run(fmt.Sprintf("size=%dMB/%s", size>>20, mode), func(b *testing.B) {
				benchAppend(b, size, mode == "poll", mode == "fsnotify+cursor")
			})
		}
	}
}

// benchAppend: with durable, every delivery also saves the cursor (write,
// fsync, rename), as local mode does.
func benchAppend(b *testing.B, size int64, noWatch, durable bool) {
	dir := b.TempDir()
	main := filepath.Join(dir, "s.jsonl")
	f, err := os.Create(main)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	filler := `{"type":"progress","data":"` + strings.Repeat("x", 1000) + `"}` + "\n"
	for n := int64(0); n < size; n += int64(len(filler)) {
		w.WriteString(filler)
	}
	w.Flush()
	f.Close()

	sink := make(chanSink, 16)
	poll := 100 * time.Millisecond
	cursor := ""
	if durable {
		cursor = filepath.Join(b.TempDir(), "cursor.json")
	}
	sc, _ := New(Config{ProjectDir: dir, NoWatch: noWatch, PollInterval: poll, CursorFile: cursor,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	sc.AddSession("s")
	// Wait for the initial read of the whole file.
	appendTo(b, main, userLine("warm", "x"))
	<-sink

	out, err := os.OpenFile(main, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		line := userLine(fmt.Sprintf("u%d", i), "hello")
		t0 := time.Now()
		if _, err := out.WriteString(line); err != nil {
			b.Fatal(err)
		}
		<-sink
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkStartWithHistory measures the time from a scanner's start to the
// first record of a new session, with a cursor that knows 0 or 300 earlier
// sessions of the folder (their transcripts still there): "earlier=300"
// as this version leaves its cursor (MaxCursorSessions kept), "300-old" a
// cursor of all 300 as earlier versions wrote it. Start cost must not grow
// with history.
func BenchmarkStartWithHistory(b *testing.B) {
	for _, tc := range []struct {
		name string
		n    int
		old  bool
	}{{"earlier=0", 0, false}, {"earlier=300", 300, false}, {"earlier=300-old", 300, true}} {
		n := tc.n
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			cursor := filepath.Join(b.TempDir(), "cursor.json")
			earlierSessions(b, dir, cursor, n, true)
			if !tc.old {
				c, _ := LoadCursor(cursor)
				c.prune(dir)
				c.trim(dir)
				c.Save(cursor)
			}
			pristine, _ := os.ReadFile(cursor)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				if n > 0 {
					os.WriteFile(cursor, pristine, 0o600)
				} else {
					os.Remove(cursor)
				}
				id := fmt.Sprintf("new-%d", i)
				appendTo(b, filepath.Join(dir, id+".jsonl"), userLine("first-"+id, "x"))
				sink := make(chanSink, 16)
				b.StartTimer()
				sc, _ := New(Config{ProjectDir: dir, CursorFile: cursor, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { sc.Run(ctx); close(done) }()
				sc.AddSession(id)
				<-sink
				b.StopTimer()
				cancel()
				<-done
				b.StartTimer()
			}
		})
	}
}

// BenchmarkExitLatency measures, over 20 runs, the time from "Claude has
// exited, stop" to Run returning with Claude's last record delivered, with
// the default poll interval: "flush" is what the launcher does now (Flush,
// then stop); "two-passes" is what it did before (wait for two passes,
// then stop). Claude's last record was written just before it exited
// ("at-exit") or had been read already ("read-before").
func BenchmarkExitLatency(b *testing.B) {
	for _, mode := range []string{"flush", "two-passes"} {
		for _, last := range []string{"at-exit", "read-before"} {
			b.Run(mode+"/"+last, func(b *testing.B) {
				var lat []time.Duration
				for range b.N {
					for run := range 20 {
						lat = append(lat, exitOnce(b, run, mode == "flush", last == "read-before"))
					}
				}
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}

func exitOnce(b *testing.B, run int, flush, readBefore bool) time.Duration {
	dir := b.TempDir()
	main := filepath.Join(dir, "s.jsonl")
	appendTo(b, main, userLine("u0", "x"))
	sink := make(chanSink, 16)
	sc, _ := New(Config{ProjectDir: dir, CursorFile: filepath.Join(b.TempDir(), "cursor.json"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sc.Run(ctx); close(done) }()
	sc.AddSession("s")
	<-sink
	// Claude's last record, then Claude exits.
	appendTo(b, main, userLine(fmt.Sprint("last-", run), "bye"))
	var r Record
	if readBefore {
		r = <-sink
		// Let the passes its events cause end: the scanner is idle, as
		// when Claude's last write was a while before it exited.
		for idle := false; !idle; {
			select {
			case <-sc.Synced():
			case <-time.After(100 * time.Millisecond):
				idle = true
			}
		}
	}
	t0 := time.Now()
	if flush {
		sc.Flush(context.Background())
	} else {
		<-sc.Synced()
		<-sc.Synced()
	}
	cancel()
	<-done
	d := time.Since(t0)
	if !readBefore {
		r = <-sink
	}
	if !strings.HasPrefix(r.UUID, "last-") {
		b.Fatalf("last record not delivered: %s", r.UUID)
	}
	return d
}
