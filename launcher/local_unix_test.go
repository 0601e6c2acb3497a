//go:build unix

package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Signals sent to ccrelay reach Claude, which decides what they mean.
func TestRunLocalForwardsSignals(t *testing.T) {
	siglog := filepath.Join(t.TempDir(), "signals")
	r := newFakeRun(t, map[string]any{"lines": []string{`{"type":"user","uuid":"u1","message":{"content":"hi"}}`}, "hang": true},
		"FAKE_CLAUDE_SIGLOG="+siglog)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { c, _ := RunLocal(ctx, r.options(nil)); done <- c }()
	waitForTranscript(t, r.home)
	want := []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGWINCH}
	for i, sig := range want {
		syscall.Kill(os.Getpid(), sig)
		deadline := time.Now().Add(untilLimit)
		for {
			b, _ := os.ReadFile(siglog)
			if strings.Count(string(b), "\n") > i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v did not reach claude; log: %q", sig, b)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	b, _ := os.ReadFile(siglog)
	if got := strings.Split(strings.TrimSpace(string(b)), "\n"); strings.Join(got, ",") != "interrupt,hangup,window changed" {
		t.Fatalf("claude got %v", got)
	}
	cancel()
	if code := <-done; code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d", code)
	}
}
