package scanner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/durable"
)

// Cursor is the durable state of a scanner: per file, the position up to
// which the records' output is known to be durable. It keeps the positions
// of at most MaxCursorSessions sessions, so that a later `--resume` of one
// of them goes on where the last run stopped; a scanner follows only the
// sessions announced to it, never those of the cursor by themselves.
type Cursor struct {
	Version int `json:"version"`
	// Sessions, least recently followed first.
	Sessions []string `json:"sessions"`
	// Mains holds the main transcript of sessions announced with a path
	// of their own (the hook's transcript_path); others live in the
	// project folder under their id.
	Mains map[string]string   `json:"mains,omitempty"`
	Files map[string]Position `json:"files"`
}

// MaxCursorSessions bounds the sessions a cursor keeps positions for: the
// ones followed most recently. Older ones, and those whose main transcript
// is gone, are pruned when the cursor is loaded; a session pruned and then
// resumed is read from the start (the outbox and the relay store an
// envelope id once).
const MaxCursorSessions = 50

const cursorVersion = 2

// mainPath is the main transcript of session id.
func (c Cursor) mainPath(projectDir, id string) string {
	if p := c.Mains[id]; p != "" {
		return p
	}
	return claude.TranscriptPath(projectDir, id)
}

// sessionFiles reports whether path is the main transcript of a session
// whose main transcript is main, or one of its subagent transcripts.
func sessionFile(main, path string) bool {
	return path == main || strings.HasPrefix(path, strings.TrimSuffix(main, ".jsonl")+string(filepath.Separator))
}

// prune keeps the last MaxCursorSessions sessions whose main transcript
// still exists (a stat each) and the positions of their files only.
func (c *Cursor) prune(projectDir string) {
	if n := len(c.Sessions); n > MaxCursorSessions {
		c.Sessions = c.Sessions[n-MaxCursorSessions:]
	}
	kept := c.Sessions[:0:0]
	mains := map[string]bool{}
	for _, id := range c.Sessions {
		main := c.mainPath(projectDir, id)
		if _, err := os.Lstat(main); errors.Is(err, os.ErrNotExist) {
			continue
		}
		kept = append(kept, id)
		mains[main] = true
	}
	c.Sessions = kept
	for id := range c.Mains {
		if !slices.Contains(kept, id) {
			delete(c.Mains, id)
		}
	}
	for p := range c.Files {
		if !mains[p] && !mains[subagentOwner(p, strings.Index)] && !mains[subagentOwner(p, strings.LastIndex)] {
			delete(c.Files, p)
		}
	}
}

// subagentOwner is the main transcript of the session a subagent
// transcript (<session>/subagents/…) belongs to, or "", taking the folder
// named subagents that index finds.
func subagentOwner(p string, index func(s, sep string) int) string {
	sep := string(filepath.Separator) + "subagents" + string(filepath.Separator)
	i := index(p, sep)
	if i < 0 {
		return ""
	}
	return p[:i] + ".jsonl"
}

// LoadCursor reads a cursor file; a missing file is an empty cursor.
func LoadCursor(path string) (Cursor, error) {
	c := Cursor{Version: cursorVersion, Files: map[string]Position{}, Mains: map[string]string{}}
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read cursor %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return Cursor{Version: cursorVersion, Files: map[string]Position{}, Mains: map[string]string{}}, fmt.Errorf("cursor %s is damaged (%v); starting from the beginning of every file", path, err)
	}
	if c.Files == nil {
		c.Files = map[string]Position{}
	}
	if c.Mains == nil {
		c.Mains = map[string]string{}
	}
	return c, nil
}

// Save writes the cursor atomically (write to a temporary file, fsync,
// rename), so a crash leaves the old or the new cursor, never a torn one.
func (c Cursor) Save(path string) error {
	if path == "" {
		return nil
	}
	c.Version = cursorVersion
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return writeAtomic(path, data)
}

// writeAtomic replaces path with data durably (durable.WriteFile): a crash
// or power loss leaves the old cursor or the new one.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	if err := durable.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	return nil
}

// touch makes id the most recently followed session, with its main
// transcript main.
func (c *Cursor) touch(projectDir, id, main string) {
	c.Sessions = append(slices.DeleteFunc(c.Sessions, func(s string) bool { return s == id }), id)
	if main != claude.TranscriptPath(projectDir, id) {
		c.Mains[id] = main
	} else {
		delete(c.Mains, id)
	}
}

// trim keeps the last MaxCursorSessions sessions and the positions of their
// files (no stat: it runs at every save).
func (c *Cursor) trim(projectDir string) {
	n := len(c.Sessions)
	if n <= MaxCursorSessions {
		return
	}
	for _, id := range c.Sessions[:n-MaxCursorSessions] {
		main := c.mainPath(projectDir, id)
		for p := range c.Files {
			if sessionFile(main, p) {
				delete(c.Files, p)
			}
		}
		delete(c.Mains, id)
	}
	c.Sessions = slices.Clone(c.Sessions[n-MaxCursorSessions:])
}
