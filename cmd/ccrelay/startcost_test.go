package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
)

// writeOldOutbox fills path with size bytes of envelope lines of an
// earlier session.
func writeOldOutbox(b *testing.B, path string, size int64) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var chunk bytes.Buffer
	for i := 0; chunk.Len() < 4<<20; i++ {
		fmt.Fprintf(&chunk, `{"session":"22222222-2222-4333-8444-555555555555","id":"c%023d","time":1,"role":"agent","ev":{"t":"text","text":"%0200d"}}`+"\n", i, i)
	}
	for written := int64(0); written < size; written += int64(chunk.Len()) {
		if _, err := f.Write(chunk.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
}

// Start cost in the size of old outboxes: the time from starting bare
// ccrelay (the default file outbox) to the first envelope of its session
// on disk, with a fresh state folder and with 1 GB of old outbox (an
// earlier session of the same folder, and the one file earlier versions
// wrote for all folders). Goal: within 2× of fresh. Reported as
// first-envelope-ms (median of b.N runs).
func BenchmarkStartWithOldOutbox(b *testing.B) {
	buildFakeClaude(b)
	for _, tc := range []struct {
		name string
		old  int64
	}{{"fresh", 0}, {"old-1GB", 1 << 30}} {
		b.Run(tc.name, func(b *testing.B) {
			home, project, state := b.TempDir(), b.TempDir(), b.TempDir()
			if tc.old > 0 {
				folder := filepath.Join(state, "projects", claude.EscapeProjectPath(project))
				writeOldOutbox(b, filepath.Join(folder, "sessions", "22222222-2222-4333-8444-555555555555.jsonl"), tc.old/2)
				writeOldOutbox(b, filepath.Join(state, "outbox.jsonl"), tc.old/2)
			}
			script := filepath.Join(b.TempDir(), "script.json")
			os.WriteFile(script, []byte(`{"lines":[`+fmt.Sprintf("%q", recLines(0, 1)[0])+`],"hang":true}`), 0o644)
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				session := claude.NewSessionID()
				out := filepath.Join(state, "projects", claude.EscapeProjectPath(project), "sessions", session+".jsonl")
				cmd := exec.Command(binary, "--claude", fakeClaude, "--state", state, "--", "--session-id", session)
				cmd.Dir = project
				cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + script}
				start := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				deadline := start.Add(60 * time.Second)
				for {
					if fi, err := os.Stat(out); err == nil && fi.Size() > 0 {
						break
					}
					if time.Now().After(deadline) {
						cmd.Process.Kill()
						cmd.Wait()
						b.Fatal("no envelope within 60 s")
					}
					time.Sleep(time.Millisecond)
				}
				took = append(took, time.Since(start))
				cmd.Process.Signal(syscall.SIGTERM) // ccrelay ends Claude and exits
				cmd.Wait()
			}
			b.StopTimer()
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "first-envelope-ms")
		})
	}
}
