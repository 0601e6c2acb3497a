package scanner

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watching when the inotify watch limit is reached (docs/protocol.md,
// "Limits: the transcript scanner").
const (
	// FallbackPollInterval replaces a longer PollInterval while a folder
	// cannot be watched because the inotify watch limit was reached.
	FallbackPollInterval = 250 * time.Millisecond
	// WatchRetryInterval is how often watches are tried again after the
	// limit was reached.
	WatchRetryInterval = 10 * time.Second
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
	watcher  *fsnotify.Watcher
	watchAdd func(dir string) error // the watcher's Add (a seam for tests)
	watched  map[string]bool
	// The watch limit was reached: no watch is tried before nextTry.
	limited      bool
	limitEpisode bool // logged, not yet over
	nextTry      time.Time
	retryEvery   time.Duration
	// missingFile: with WatchFiles, a followed transcript does not exist
	// yet (it cannot be watched): the pass interval is the fallback's.
	missingFile bool
}

func newWatchState() watchState {
	return watchState{watched: map[string]bool{}, retryEvery: WatchRetryInterval}
}

// pollInterval is the periodic check's interval: faster while watches are
// missing for the limit.
func (w *watchState) pollInterval(configured time.Duration) time.Duration {
	if w.limitEpisode || w.missingFile {
		return min(configured, FallbackPollInterval)
	}
	return configured
}

// beginWatchPass allows watches to be tried again once nextTry has come.
func (w *watchState) beginWatchPass() {
	if w.limited && !time.Now().Before(w.nextTry) {
		w.limited = false
	}
}

// endWatchPass ends a limit episode when a pass added its watches.
func (s *Scanner) endWatchPass() {
	if s.limitEpisode && !s.limited {
		s.limitEpisode = false
		s.log.Info("file watching works again (inotify watches were added)")
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
	err := s.watchAdd(dir)
	switch {
	case err == nil:
		s.watched[dir] = true
	case errors.Is(err, os.ErrNotExist):
		if parent := filepath.Dir(dir); up > 0 && parent != dir {
			s.watchUp(parent, up-1)
		}
	case errors.Is(err, syscall.ENOSPC):
		// inotify says ENOSPC ("no space left on device") when the
		// user's watch limit is reached.
		s.limited, s.nextTry = true, time.Now().Add(s.retryEvery)
		if !s.limitEpisode {
			s.limitEpisode = true
			s.log.Warn("the inotify watch limit was reached (other programs, often IDEs, use the watches up): "+
				"checking for changes every "+FallbackPollInterval.String()+" instead and trying to watch again every "+
				s.retryEvery.String()+". Raise the limit with: sudo sysctl fs.inotify.max_user_watches=524288 "+
				"(and a line fs.inotify.max_user_watches=524288 in /etc/sysctl.d/ to keep it)", "dir", dir)
		}
	default:
		s.log.Warn("cannot watch folder; the periodic check covers it", "dir", dir, "err", err)
		s.watched[dir] = true // don't retry every pass
	}
}
