package launcher

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
)

// The real Codex CLI run by RunCodexLocal as `codex exec` (no terminal):
// its exit code comes back as it is, and the rollout of the thread it ran
// is reported once, with its session_meta; a failing run reports its code.
func TestRealCodexLocalExec(t *testing.T) {
	e := codextest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func(args ...string) (int, []string) {
		t.Helper()
		var mu sync.Mutex
		var threads []string
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer devnull.Close()
		code, err := RunCodexLocal(ctx, CodexLocalOptions{Codex: e.Codex, Args: args, Dir: e.Project, Env: e.Environ(), CodexHome: e.CodexHome,
			Stdin: devnull, Logger: log, ScanEvery: 100 * time.Millisecond,
			OnThread: func(p string, m *codex.SessionMeta) {
				mu.Lock()
				defer mu.Unlock()
				if m.Originator != CodexOriginatorExec || m.Cwd != e.Project {
					t.Errorf("session_meta %+v", m)
				}
				threads = append(threads, filepath.Base(p))
			}})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return code, threads
	}
	code, threads := run("exec", "--skip-git-repo-check", "say hello")
	rollouts := e.Rollouts(t)
	if code != 0 || len(rollouts) != 1 || len(threads) != 1 || threads[0] != filepath.Base(rollouts[0]) {
		t.Fatalf("exit %d, threads %v, rollouts %v", code, threads, rollouts)
	}
	id, _ := codex.ThreadID(rollouts[0])
	// A resume appends to the same rollout: reported again by this run.
	code, threads = run("exec", "--skip-git-repo-check", "resume", id, "say hello again")
	if code != 0 || len(threads) != 1 || threads[0] != filepath.Base(rollouts[0]) || len(e.Rollouts(t)) != 1 {
		t.Fatalf("resume: exit %d, threads %v, rollouts %v", code, threads, e.Rollouts(t))
	}
	if code, threads = run("exec", "--no-such-flag"); code != 2 || len(threads) != 0 {
		t.Fatalf("a bad flag: exit %d (want Codex's 2), threads %v", code, threads)
	}
}
