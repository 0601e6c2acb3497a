package launcher

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
)

// Two real Codex 0.169.0 runs in the same folder: RunCodexLocal's (held at
// a slow reply) and another started beside it, which writes a rollout of
// the same folder and kind while the first runs. Only the first's thread
// is reported.
func TestRealCodexLocalIgnoresAnotherCodex(t *testing.T) {
	e := codextest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var mu sync.Mutex
	var threads []string
	first := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := RunCodexLocal(ctx, CodexLocalOptions{Codex: e.Codex, Args: []string{"exec", "--skip-git-repo-check", "SLOWTEXT"}, Dir: e.Project,
			Env: e.Environ(), CodexHome: e.CodexHome, Stdin: devnull, Logger: log, ScanEvery: 50 * time.Millisecond,
			OnThread: func(p string, _ *codex.SessionMeta) {
				mu.Lock()
				threads = append(threads, filepath.Base(p))
				mu.Unlock()
				select {
				case first <- struct{}{}:
				default:
				}
			}})
		done <- err
	}()
	if err := e.API.WaitPaused(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("the run's own thread was not reported")
	}
	// Another Codex in the same folder, started and ended while the first
	// one waits: its rollout is new, of this folder, and codex_exec's.
	e.Exec(t, "say hello")
	e.API.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rollouts := e.Rollouts(t)
	mu.Lock()
	defer mu.Unlock()
	i := slices.IndexFunc(rollouts, func(p string) bool { return len(threads) == 1 && filepath.Base(p) == threads[0] })
	if len(rollouts) != 2 || i < 0 {
		t.Fatalf("threads reported %v, rollouts %v: want the run's own only", threads, rollouts)
	}
	// The thread reported is the first Codex's: the one that asked SLOWTEXT.
	b, err := os.ReadFile(rollouts[i])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("SLOWTEXT")) {
		t.Fatalf("the thread reported is not the run's own (no SLOWTEXT in it)")
	}
}
