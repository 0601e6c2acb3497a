// Package demo bundles a real Claude Code session for `ccrelay demo`:
// recorded from Claude Code 2.1.330 against a scripted model (see
// record_test.go), a user asks to add a flag to a tiny Go CLI; the model
// plans with a task list, reads and searches the code, edits three files,
// runs `go vet`, `go test` and the new flag, has a background subagent
// review the diff, and sums up.
package demo

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

//go:embed session
var files embed.FS

// SessionID is the id of the bundled session: the name of its main
// transcript.
func SessionID() string {
	mains, _ := fs.Glob(files, "session/*.jsonl")
	if len(mains) != 1 {
		return ""
	}
	return strings.TrimSuffix(path.Base(mains[0]), ".jsonl")
}

// Write lays the session out in dir as Claude does (main transcript, and
// its subagent transcripts in <session>/subagents/) and returns the path
// of the main transcript.
func Write(dir string) (string, error) {
	id := SessionID()
	if id == "" {
		return "", fmt.Errorf("write the demo session: no single transcript bundled")
	}
	err := fs.WalkDir(files, "session", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("session", filepath.FromSlash(p))
		if filepath.Dir(rel) == "subagents" {
			rel = filepath.Join(id, rel)
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("write the demo session: %w", err)
	}
	return filepath.Join(dir, id+".jsonl"), nil
}
