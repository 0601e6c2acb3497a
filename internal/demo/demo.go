// Package demo bundles a real Claude Code session (recorded from Claude
// Code 2.1.330 against a scripted model: a prompt, a background subagent
// that runs `ls`, its task notification and the model's follow-up) for
// `ccrelay demo`.
package demo

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SessionID is the id of the bundled session.
const SessionID = "fc141a3b-db42-42fd-b003-09c712c8bbfd"

//go:embed session
var files embed.FS

// Write lays the session out in dir as Claude does (main transcript, and
// its subagent transcripts in <session>/subagents/) and returns the path
// of the main transcript.
func Write(dir string) (string, error) {
	err := fs.WalkDir(files, "session", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("session", p)
		if filepath.Dir(rel) == "subagents" {
			rel = filepath.Join(SessionID, rel)
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
	return filepath.Join(dir, SessionID+".jsonl"), nil
}
