package scanner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Cursor is the durable state of a scanner: per file, the position up to
// which the records' output is known to be durable.
type Cursor struct {
	Version  int                 `json:"version"`
	Sessions []string            `json:"sessions"` // in the order they were announced; the last is current
	Files    map[string]Position `json:"files"`
}

const cursorVersion = 1

// LoadCursor reads a cursor file; a missing file is an empty cursor.
func LoadCursor(path string) (Cursor, error) {
	c := Cursor{Version: cursorVersion, Files: map[string]Position{}}
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
		return Cursor{Version: cursorVersion, Files: map[string]Position{}}, fmt.Errorf("cursor %s is damaged (%v); starting from the beginning of every file", path, err)
	}
	if c.Files == nil {
		c.Files = map[string]Position{}
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
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cursor-*")
	if err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save cursor: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save cursor: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	return nil
}
