//go:build unix

package launcher

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/scanner"
)

// What is put in the sessions folder under a rollout's name but is not a
// regular file Codex wrote is not this run's thread: a link (to a rollout
// of this folder kept elsewhere) is not reported, and a named pipe neither
// reported nor waited on (its open would wait for a writer, and
// RunCodexLocal with it after Codex's exit).
func TestCodexWatchOnlyRegularRollouts(t *testing.T) {
	home, cwd, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	var got []string
	w := newCodexWatch(home, cwd, nil, func(p string, m *codex.SessionMeta) { got = append(got, filepath.Base(p)) },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.snapshot()
	dir := filepath.Join(codex.SessionsDir(home), "2026", "11", "27")
	real := rolloutFor(t, home, "d", "01a21daf-e89b-7892-97c7-2fee8a1b0001", cwd, CodexOriginatorTUI)
	kept := filepath.Join(elsewhere, filepath.Base(real))
	if err := os.Rename(real, kept); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(kept, filepath.Join(dir, filepath.Base(real))); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "rollout-2026-11-27T15-46-37-01a21daf-e89b-7892-97c7-2fee8a1b0002.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // unblock a reader still waiting
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	done := make(chan error, 1)
	go func() {
		w.scan()
		_, err := readSessionMeta(fifo) // as if it became a pipe after the listing
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, scanner.ErrNotRegular) {
			t.Errorf("readSessionMeta of a named pipe: %v, want ErrNotRegular", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("looking for rollouts still waits on a named pipe after 10 s")
	}
	if len(got) != 0 {
		t.Errorf("reported %v; a link and a named pipe are not rollouts Codex wrote", got)
	}
}
