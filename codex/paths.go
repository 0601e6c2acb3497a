package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Home is Codex's home directory: $CODEX_HOME when set and non-empty (used
// as given), else ~/.codex. getenv is usually os.Getenv; home is the user's
// home directory.
func Home(getenv func(string) string, home string) string {
	if h := getenv("CODEX_HOME"); h != "" {
		return h
	}
	return filepath.Join(home, ".codex")
}

// SessionsDir is the folder of a Codex home that holds the rollouts, one
// folder per day: sessions/YYYY/MM/DD/rollout-*.jsonl.
func SessionsDir(codexHome string) string {
	return filepath.Join(codexHome, "sessions")
}

// DayDir is the folder of the rollouts of threads started on t's day (Codex
// uses the local date).
func DayDir(codexHome string, t time.Time) string {
	return filepath.Join(SessionsDir(codexHome), t.Format("2006"), t.Format("01"), t.Format("02"))
}

// dayOf parses a day folder (…/sessions/YYYY/MM/DD): its sessions folder
// and its day; ok false for another folder.
func dayOf(dir string) (sessions string, day time.Time, ok bool) {
	d := filepath.Clean(dir)
	dd, mm := filepath.Base(d), filepath.Base(filepath.Dir(d))
	yyyy := filepath.Base(filepath.Dir(filepath.Dir(d)))
	if len(yyyy) != 4 || len(mm) != 2 || len(dd) != 2 {
		return "", time.Time{}, false
	}
	t, err := time.ParseInLocation("2006/01/02", yyyy+"/"+mm+"/"+dd, time.Local)
	if err != nil {
		return "", time.Time{}, false
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(d))), t, true
}

// NextDayDir is the day folder after dir, a day folder of Codex's
// sessions (…/sessions/YYYY/MM/DD); "" when dir is no day folder.
func NextDayDir(dir string) string {
	sessions, day, ok := dayOf(dir)
	if !ok {
		return ""
	}
	next := day.AddDate(0, 0, 1)
	return filepath.Join(sessions, next.Format("2006"), next.Format("01"), next.Format("02"))
}

// SameRootDayDir is the day folder of t's day beside dir, a day folder of
// Codex's sessions; "" when dir is no day folder.
func SameRootDayDir(dir string, t time.Time) string {
	sessions, _, ok := dayOf(dir)
	if !ok {
		return ""
	}
	return filepath.Join(sessions, t.Format("2006"), t.Format("01"), t.Format("02"))
}

// rolloutName is a rollout's file name: rollout-<local time>-<thread uuid>.jsonl.
var rolloutName = regexp.MustCompile(`^rollout-.*-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$`)

var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ThreadID is the thread id a rollout's file name ends with, and false
// when the name is not a rollout's.
func ThreadID(path string) (string, bool) {
	m := rolloutName.FindStringSubmatch(strings.ToLower(filepath.Base(path)))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// IsRolloutName reports whether path's name is a rollout's.
func IsRolloutName(path string) bool {
	_, ok := ThreadID(path)
	return ok
}

// FindRollout returns the rollout of thread id under codexHome, searching
// the day folders newest first; os.ErrNotExist (wrapped) when there is none.
func FindRollout(codexHome, id string) (string, error) {
	id = strings.ToLower(id)
	if !uuidRe.MatchString(id) {
		return "", fmt.Errorf("find the rollout of thread %q: not a thread id", id)
	}
	matches, err := filepath.Glob(filepath.Join(SessionsDir(codexHome), "*", "*", "*", "rollout-*-"+id+".jsonl"))
	if err != nil {
		return "", fmt.Errorf("find the rollout of thread %s: %w", id, err)
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("no rollout of thread %s under %s: %w", id, SessionsDir(codexHome), os.ErrNotExist)
	}
	// Names sort by their date folders and time: the last is the newest.
	best := matches[0]
	for _, m := range matches[1:] {
		if m > best {
			best = m
		}
	}
	return best, nil
}
