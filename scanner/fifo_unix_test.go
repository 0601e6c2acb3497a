//go:build unix

package scanner

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// mkfifo makes a named pipe at p, and unblocks (at the test's end) any
// reader still waiting to open it.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

// A transcript or rollout replaced by a named pipe (or a link to one) is
// an error to read, not a read that waits for a writer forever: the
// follower's only goroutine would hang, and ccrelay with it at its exit.
func TestTailRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "rollout-2026-11-27T15-46-37-01a21daf-e89b-7892-97c7-2fee8a1b0001.jsonl")
	mkfifo(t, fifo)
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link} {
		tl := NewTail(p, Position{})
		done := make(chan error, 2)
		go func() {
			_, err := tl.ReadNew(func(Line) error { return nil })
			done <- err
			_, err = tl.Verify()
			done <- err
		}()
		for range 2 {
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotRegular) {
					t.Errorf("%s: %v, want ErrNotRegular", filepath.Base(p), err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: reading a named pipe still waits after 10 s", filepath.Base(p))
			}
		}
	}
	files, err := CodexRollouts(dir)
	if err != nil || len(files) != 0 {
		t.Errorf("CodexRollouts listed %v (%v); a named pipe is not a rollout", files, err)
	}
}

// A named pipe with a rollout's name beside a followed rollout is judged
// once, as no subagent's, rather than opened again at every pass; a
// rollout whose first line is not whole yet is judged later.
func TestReadParentJudgesFIFOOnce(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rollout-2026-11-27T15-59-41-01a21dbb-e0d9-7522-8d58-c59df541000b.jsonl")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if parent, ok := readParent(p); !ok || parent != "" {
		t.Errorf("a pipe: parent %q, judged %v; want no parent, judged", parent, ok)
	}
	half := filepath.Join(dir, "rollout-2026-11-27T15-59-42-01a21dbb-e24b-7ca3-aa69-cdca4f166101.jsonl")
	if err := os.WriteFile(half, []byte(`{"ordinal":0,"type":"session_meta","payload":{"parent_thread_id":"x"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := readParent(half); ok {
		t.Error("a first line not whole was judged")
	}
	if err := os.WriteFile(half, []byte(`{"ordinal":0,"type":"session_meta","payload":{"parent_thread_id":"01A21DBB-E0D9-7522-8D58-C59DF541000B"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if parent, ok := readParent(half); !ok || parent != "01a21dbb-e0d9-7522-8d58-c59df541000b" {
		t.Errorf("parent %q, judged %v", parent, ok)
	}
}
