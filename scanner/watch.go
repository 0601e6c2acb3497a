package scanner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watching when inotify's limits are reached (docs/protocol.md, "Limits:
// the transcript scanner"; docs/operate.md, "When file watching fails").
const (
	// FallbackPollInterval replaces a longer PollInterval while Claude's
	// transcripts cannot all be watched: the watcher could not be made
	// (fs.inotify.max_user_instances) or a folder could not be watched
	// (fs.inotify.max_user_watches).
	FallbackPollInterval = 250 * time.Millisecond
	// WatchRetryMin and WatchRetryMax bound the backoff between attempts
	// to watch again meanwhile: it doubles from WatchRetryMin up to
	// WatchRetryMax, so watching resumes at most WatchRetryMax after the
	// kernel has handles again.
	WatchRetryMin = 500 * time.Millisecond
	WatchRetryMax = 2 * time.Second
	// watchAncestors is how many missing folder levels a watch climbs to
	// find a folder that exists (the project folder of a first session,
	// a session's subagents/ folder): the missing folder's creation is
	// then seen at once.
	watchAncestors = 3
)

// watchFilesDefault: kqueue (macOS, the BSDs) holds a descriptor for
// every entry of a watched folder, so a project folder of 1,000
// transcripts would take 1,000 descriptors (macOS allows 256 by default).
// There the scanner watches the transcripts it follows (its sessions' main
// files, and their subagents/ folders, which hold only theirs) and never
// the project folder. Tested on Linux with Config.WatchFiles.
var watchFilesDefault = runtime.GOOS != "linux" && runtime.GOOS != "windows"

type watchState struct {
	watcher    *fsnotify.Watcher
	newWatcher func() (*fsnotify.Watcher, error) // fsnotify.NewWatcher (a seam for tests)
	watchAdd   func(dir string) error            // nil: the watcher's Add (a seam for tests)
	watched    map[string]bool
	// Watching failed for a limit of the kernel's: nothing is tried
	// before nextTry, which backs off from retryMin to retryMax.
	limited            bool
	limitEpisode       bool // said, not yet over
	limitSince         time.Time
	nextTry            time.Time
	retryMin, retryMax time.Duration
	retryWait          time.Duration // the last wait; 0 outside an episode
	// missingFile: with WatchFiles, a followed transcript does not exist
	// yet (it cannot be watched): the pass interval is the fallback's.
	missingFile bool
}

func newWatchState() watchState {
	return watchState{watched: map[string]bool{}, newWatcher: fsnotify.NewWatcher, retryMin: WatchRetryMin, retryMax: WatchRetryMax}
}

// pollInterval is the periodic check's interval: faster while watches are
// missing for a limit.
func (w *watchState) pollInterval(configured time.Duration) time.Duration {
	if w.limitEpisode || w.missingFile {
		return min(configured, FallbackPollInterval)
	}
	return configured
}

// events returns the watcher's channels; nil ones without a watcher.
func (w *watchState) events() (<-chan fsnotify.Event, <-chan error) {
	if w.watcher == nil {
		return nil, nil
	}
	return w.watcher.Events, w.watcher.Errors
}

// closeWatcher closes the watcher, if there is one.
func (w *watchState) closeWatcher() {
	if w.watcher != nil {
		w.watcher.Close()
		w.watcher = nil
	}
}

// openWatcher makes the watcher; on failure (inotify's instance limit,
// the process's open-file limit) the scanner polls and tries again.
func (s *Scanner) openWatcher() {
	w, err := s.newWatcher()
	if err != nil {
		s.limitReached(err, "")
		return
	}
	s.watcher = w
	clear(s.watched)
}

// beginWatchPass allows watches to be tried again once nextTry has come,
// and makes the watcher if it could not be made before.
func (s *Scanner) beginWatchPass() {
	if !s.limited || time.Now().Before(s.nextTry) {
		return
	}
	s.limited = false
	if s.watcher == nil && !s.cfg.NoWatch {
		s.openWatcher()
	}
}

// endWatchPass ends a limit episode when a pass made its watches.
func (s *Scanner) endWatchPass() {
	if s.limitEpisode && !s.limited && s.watcher != nil {
		s.limitEpisode, s.retryWait = false, 0
		s.polled.Store(false)
		after := time.Since(s.limitSince).Round(time.Millisecond)
		s.log.Info("file watching works again (inotify watches were added)", "after", after)
		s.notice("ccrelay: watching Claude's transcripts for changes again (after %v)", after)
	}
}

// limitReached starts or continues a limit episode: polling every
// FallbackPollInterval, the next attempt after the backoff, the user told
// once per episode.
func (s *Scanner) limitReached(err error, dir string) {
	if s.retryWait == 0 {
		s.retryWait = s.retryMin
	} else {
		s.retryWait = min(2*s.retryWait, s.retryMax)
	}
	s.limited, s.nextTry = true, time.Now().Add(s.retryWait)
	if s.limitEpisode {
		return
	}
	s.limitEpisode, s.limitSince = true, time.Now()
	s.polled.Store(true)
	var what, hint string
	switch {
	case errors.Is(err, syscall.ENOSPC):
		// inotify says ENOSPC ("no space left on device") when the
		// user's watch limit is reached.
		what = "the inotify watch limit was reached (other programs, often IDEs, use the watches up)"
		hint = "sudo sysctl fs.inotify.max_user_watches=524288 (and a line fs.inotify.max_user_watches=524288 in /etc/sysctl.d/ to keep it)"
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
		// inotify_init says EMFILE when the user's instance limit is
		// reached (or the process has no descriptor left).
		what = "the inotify instance limit was reached (other programs use the instances up), or ccrelay's open-file limit"
		hint = "sudo sysctl fs.inotify.max_user_instances=1024 (and a line fs.inotify.max_user_instances=1024 in /etc/sysctl.d/ to keep it)"
	default:
		what = "file watching failed"
	}
	line := what + ": checking for changes every " + FallbackPollInterval.String() + " instead and trying to watch again every " +
		s.retryMin.String() + " to " + s.retryMax.String()
	if hint != "" {
		line += ". Raise the limit with: " + hint
	}
	if hint == "" {
		s.log.Warn(line, "dir", dir, "err", err)
	} else {
		s.log.Warn(line, "dir", dir) // the error's own words mislead ("no space left on device")
	}
	msg := "ccrelay: cannot watch Claude's transcripts for changes: " + what + "; checking every " + FallbackPollInterval.String() +
		" instead (changes reach the phone a little later) and trying again until it works"
	if hint != "" {
		msg += ". Raise the limit with: " + hint
	} else {
		msg += " (" + err.Error() + ")"
	}
	s.notice("%s", msg)
}

// Polled reports whether Claude's transcripts are polled now because they
// cannot all be watched (a limit of the kernel's): from the fallback's
// first notice to the one that says they are watched again. Safe from any
// goroutine.
func (s *Scanner) Polled() bool { return s.polled.Load() }

// notice tells the user (Config.Notice), if set.
func (s *Scanner) notice(format string, args ...any) {
	if s.cfg.Notice != nil {
		fmt.Fprintf(s.cfg.Notice, format+"\n", args...)
	}
}

// watch watches dir, or the nearest existing folder above it (with
// WatchFiles, never the project folder or above).
func (s *Scanner) watch(dir string) { s.watchUp(dir, watchAncestors) }

// watchFile watches a followed transcript (WatchFiles); one that does not
// exist yet is looked for at the fallback interval.
func (s *Scanner) watchFile(path string) {
	if s.watcher == nil || s.watched[path] || s.limited {
		return
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		s.missingFile = true
		return
	}
	s.watchUp(path, 0)
}

func (s *Scanner) watchUp(dir string, up int) {
	if s.watcher == nil || s.watched[dir] || s.limited {
		return
	}
	if *s.cfg.WatchFiles && !strings.HasPrefix(dir, s.cfg.ProjectDir+string(filepath.Separator)) {
		return // the project folder or above: every transcript's descriptor
	}
	add := s.watchAdd
	if add == nil {
		add = s.watcher.Add
	}
	err := add(dir)
	switch {
	case err == nil:
		s.watched[dir] = true
	case errors.Is(err, os.ErrNotExist):
		if parent := filepath.Dir(dir); up > 0 && parent != dir {
			s.watchUp(parent, up-1)
		}
	case errors.Is(err, syscall.ENOSPC):
		s.limitReached(err, dir)
	default:
		s.log.Warn("cannot watch folder; the periodic check covers it", "dir", dir, "err", err)
		s.watched[dir] = true // don't retry every pass
	}
}
