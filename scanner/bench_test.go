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
