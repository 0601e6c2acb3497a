package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A session has one follower at a time. A second follower for the same
// Claude (a SessionStart hook again after /compact) leaves it to the
// first at once. One for another Claude of the same session (claude
// --resume just after the first Claude ended, while its follower still
// sends what it read) waits for the first, then follows; it gives up once
// its own Claude has ended.
func TestFollowLockHandsOver(t *testing.T) {
	const session = "f0110ede-0000-4000-8000-00000000000b"
	ctx := context.Background()
	alive := os.Getpid()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := gone.Process.Pid

	t.Run("the same Claude", func(t *testing.T) {
		dir := t.TempDir()
		first, err := followLock(ctx, dir, session, alive)
		if err != nil || first == nil {
			t.Fatalf("first: %v, %v", first, err)
		}
		defer releaseFollowLock(first)
		if second, err := followLock(ctx, dir, session, alive); second != nil || err != nil {
			t.Fatalf("a second follower of the same Claude took the lock: %v, %v", second, err)
		}
	})
	t.Run("another Claude that ended", func(t *testing.T) {
		dir := t.TempDir()
		first, err := followLock(ctx, dir, session, alive)
		if err != nil || first == nil {
			t.Fatalf("first: %v, %v", first, err)
		}
		defer releaseFollowLock(first)
		if second, err := followLock(ctx, dir, session, dead); second != nil || err != nil {
			t.Fatalf("a follower whose Claude ended took the lock: %v, %v", second, err)
		}
	})
	t.Run("another Claude that runs", func(t *testing.T) {
		dir := t.TempDir()
		sleeper := exec.Command("sleep", "600")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
		first, err := followLock(ctx, dir, session, sleeper.Process.Pid)
		if err != nil || first == nil {
			t.Fatalf("first: %v, %v", first, err)
		}
		got := make(chan error, 1)
		go func() {
			second, err := followLock(ctx, dir, session, alive)
			if err == nil && second == nil {
				err = os.ErrNotExist
			}
			if second != nil {
				releaseFollowLock(second)
			}
			got <- err
		}()
		select {
		case err := <-got:
			t.Fatalf("the second follower did not wait for the first: %v", err)
		case <-time.After(3 * followPoll):
		}
		releaseFollowLock(first)
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("the second follower did not follow once the first ended: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the second follower still waits after the first ended")
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Errorf("files left: %v", left)
		}
	})
}
