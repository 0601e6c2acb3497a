package scanner

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ccrelay/ccrelay/internal/testutil"
)

// inotify's instance limit is reached: the watcher cannot be made. The
// scanner polls every FallbackPollInterval (the configured poll here is an
// hour), tells the user once, tries again with its real backoff, and once
// the kernel has instances again it watches within WatchRetryMax, says so
// once, and is event-driven again.
func TestScannerWatcherRetried(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "s1.jsonl")
	var limit atomic.Bool
	limit.Store(true)
	var attempts atomic.Int64
	var notices, logs testutil.SyncBuffer
	h := startWith(t, dir, Config{PollInterval: time.Hour, Notice: &notices, Logger: logTo(&logs)}, func(s *Scanner) {
		s.newWatcher = func() (*fsnotify.Watcher, error) {
			attempts.Add(1)
			if limit.Load() {
				return nil, fmt.Errorf("inotify_init: %w", syscall.EMFILE)
			}
			return fsnotify.NewWatcher()
		}
	})
	h.sc.AddSession("s1")
	flush(t, h.sc) // the announcing pass is over: only a poll can read u1
	appendTo(t, main, userLine("u1", "a"))
	waitFor(t, "u1 by the fallback poll", func() bool { return len(h.sink.uuids(false)) == 1 })
	if got := notices.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "inotify instance limit") ||
		!strings.Contains(got, "fs.inotify.max_user_instances") {
		t.Fatalf("the user heard:\n%s", got)
	}
	if !h.sc.Polled() {
		t.Fatal("Polled() is false while the watcher cannot be made")
	}
	// A few attempts, backing off (0.5 s, 1 s, 2 s, 2 s, …): not one a
	// pass. The limit is lifted once the backoff is at its longest.
	waitFor(t, "four attempts", func() bool { return attempts.Load() >= 4 })
	episode := time.Now()
	limit.Store(false)
	freed := time.Now()
	waitFor(t, "watching again", func() bool { return strings.Contains(notices.String(), "for changes again") })
	resumed := time.Since(freed)
	t.Logf("instances free -> watching again: %v (%d attempts; backoff %v to %v)", resumed.Round(time.Millisecond),
		attempts.Load(), WatchRetryMin, WatchRetryMax)
	if resumed > WatchRetryMax+3*time.Second {
		t.Fatalf("watching resumed %v after the limit was lifted (backoff at most %v)", resumed, WatchRetryMax)
	}
	if n, passes := attempts.Load(), time.Since(episode)/FallbackPollInterval; n > 8 {
		t.Fatalf("%d attempts to make the watcher (a pass every %v, %d since): no backoff", n, FallbackPollInterval, passes)
	}
	if h.sc.Polled() {
		t.Fatal("Polled() is still true once watching again")
	}
	// Event-driven again: the poll is an hour.
	appendTo(t, main, userLine("u2", "b"))
	waitFor(t, "u2 by a watch event", func() bool { return len(h.sink.uuids(false)) == 2 })
	if got := notices.String(); strings.Count(got, "cannot watch") != 1 || strings.Count(got, "for changes again") != 1 {
		t.Fatalf("the user heard:\n%s", got)
	}
}
