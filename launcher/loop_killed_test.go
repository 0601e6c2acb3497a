//go:build unix

package launcher

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// noticeWriter keeps what the loop tells the terminal and signals each
// write.
type noticeWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	wrote chan struct{}
}

func (w *noticeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *noticeWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// The terminal's Claude is killed by a signal just before a prompt from
// the app reaches the loop (the app's prompt and the kill race): the loop
// waits a moment for a command on its way, takes the prompt and goes on in
// remote mode, instead of ending as if the user had quit Claude and
// leaving the prompt unanswered on the relay.
func TestLoopTakesPromptAfterLocalClaudeKilled(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	stream := filepath.Join(t.TempDir(), "stream.json")
	pidlog := filepath.Join(t.TempDir(), "pids")
	const sess = "66666666-2222-4333-8444-777777777777"
	writeJSON(t, local, map[string]any{"lines": []string{}, "hang": true})
	writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "remote answer"})}})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local, "FAKE_CLAUDE_STREAM=" + stream, "FAKE_CLAUDE_PIDLOG=" + pidlog}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	sr := startScan(t, home, project, out, log)
	cmds := make(chan Command)
	ev := &events{}
	notice := &noticeWriter{wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: sr.pipe, Scanner: sr.sc, Commands: cmds, Events: ev, Logger: log, Notice: notice,
		KilledWait: time.Minute, // a loaded machine: the test sends at once anyway
	})
	waitFor(t, "local mode announced", func() bool { return ev.last().Mode == "local" })
	var pid int
	waitFor(t, "the terminal's Claude started", func() bool {
		b, _ := os.ReadFile(pidlog)
		f := strings.Fields(string(b))
		if len(f) > 0 {
			pid, _ = strconv.Atoi(f[0])
		}
		return pid > 0
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The prompt reaches the loop only once the loop has seen Claude die.
	deadline := time.After(30 * time.Second)
	for !strings.Contains(notice.String(), "killed") {
		select {
		case r := <-done:
			t.Fatalf("the loop ended (code %d, err %v) as Claude was killed, with a prompt from the app on its way; told the terminal %q", r.code, r.err, notice.String())
		case <-notice.wrote:
		case <-deadline:
			t.Fatalf("the loop neither ended nor said Claude was killed; told the terminal %q", notice.String())
		}
	}
	replies := make(chan error, 1)
	select {
	case cmds <- Command{Command: protocol.Command{ID: "c1", Kind: protocol.CommandPrompt, Text: "from the app"}, Reply: func(err error) { replies <- err }}:
	case r := <-done:
		t.Fatalf("the loop ended (code %d, err %v) before it took the prompt", r.code, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the loop never took the prompt")
	}
	select {
	case err := <-replies:
		if err != nil {
			t.Fatalf("prompt rejected: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the prompt was never answered")
	}
	rig := &remoteRig{t: t, out: out, ev: ev}
	rig.until("the remote turn", has("A(remote answer)", 1))
	waitFor(t, "remote mode announced", func() bool { return ev.last().Mode == "remote" })
	cancel()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
}

// A terminal's Claude that the user quits (an exit, not a signal) ends the
// loop at once: no wait for the app.
func TestLoopEndsAtOnceWhenClaudeExits(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	writeJSON(t, local, map[string]any{"lines": []string{}, "exit": 3})
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sr := startScan(t, home, project, &MemOutbox{}, log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", "66666666-2222-4333-8444-888888888888"),
		Pipeline: sr.pipe, Scanner: sr.sc, Commands: make(chan Command), Events: &events{}, Logger: log,
		KilledWait: time.Hour,
	})
	select {
	case r := <-done:
		if r.err != nil || r.code != 3 {
			t.Fatalf("RunLoop: code %d, err %v; want 3, nil", r.code, r.err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the loop still runs %s after Claude exited", time.Since(start))
	}
}
