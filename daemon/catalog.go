package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// Bounds of a scan of Claude Code's projects folder.
const (
	// MaxProjects bounds the project folders looked at (the most recently
	// changed first).
	MaxProjects = protocol.DaemonFolders
	// MaxHeads bounds the transcripts whose first lines are read in one
	// project folder (for its folder and its past sessions' prompts).
	MaxHeads = protocol.DaemonSessions
)

// catalog is what a scan found: the folders Claude Code knows that still
// exist, most recent first, with their past sessions.
type catalog struct {
	folders []protocol.DaemonFolder
	known   map[string]bool // real paths of the folders
}

// heads keeps what the first lines of transcripts said, by path, with the
// size the file had then: a rescan reads again only a transcript that grew
// and had not said both yet (the first lines of a file do not change). It
// holds the transcripts of the last scan alone (at most MaxProjects ×
// MaxHeads).
type heads map[string]cachedHead

type cachedHead struct {
	size  int64
	head  claude.Head
	codex codex.Head // a Codex rollout's (see scanCodex)
	seen  bool       // read or used in the scan under way
}

// read returns the head of the transcript at path, of size bytes.
func (hs heads) read(path string, size int64) (claude.Head, error) {
	if c, ok := hs[path]; ok && (c.size == size || (c.head.Cwd != "" && c.head.Prompt != "")) {
		c.seen = true
		hs[path] = c
		return c.head, nil
	}
	h, err := claude.ReadHead(path)
	if err != nil {
		return h, err
	}
	hs[path] = cachedHead{size: size, head: h, seen: true}
	return h, nil
}

// readCodex returns the head of the Codex rollout at path, of size bytes.
func (hs heads) readCodex(path string, size int64) (codex.Head, error) {
	if c, ok := hs[path]; ok && (c.size == size || (c.codex.Cwd != "" && c.codex.Prompt != "")) {
		c.seen = true
		hs[path] = c
		return c.codex, nil
	}
	h, err := codex.ReadHead(path)
	if err != nil {
		return h, err
	}
	hs[path] = cachedHead{size: size, codex: h, seen: true}
	return h, nil
}

// sweep forgets the transcripts the last scan did not look at.
func (hs heads) sweep() {
	for p, c := range hs {
		if !c.seen {
			delete(hs, p)
			continue
		}
		c.seen = false
		hs[p] = c
	}
}

// scan reads Claude Code's projects folder (configDir/projects): each
// project's folder (the cwd its transcripts name) and its latest sessions.
// Folders that are gone are left out; so is what cannot be read.
func scan(configDir string, hs heads) (catalog, error) {
	defer hs.sweep()
	c := catalog{known: map[string]bool{}}
	root := filepath.Join(configDir, "projects")
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("scan %s: %w", root, err)
	}
	type project struct {
		dir string
		at  int64
	}
	var projects []project
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		projects = append(projects, project{filepath.Join(root, e.Name()), fi.ModTime().UnixMilli()})
	}
	slices.SortFunc(projects, func(a, b project) int { return cmp.Compare(b.at, a.at) })
	for _, p := range projects[:min(len(projects), MaxProjects)] {
		f, ok := readProject(p.dir, hs)
		if !ok {
			continue
		}
		real, err := realDir(f.Dir)
		if err != nil || c.known[real] {
			continue // gone, or a second project folder for one folder
		}
		c.known[real] = true
		c.folders = append(c.folders, f)
	}
	slices.SortStableFunc(c.folders, func(a, b protocol.DaemonFolder) int { return cmp.Compare(b.At, a.At) })
	return c, nil
}

// readProject reads one project folder: its latest transcripts' heads.
func readProject(dir string, hs heads) (protocol.DaemonFolder, bool) {
	var f protocol.DaemonFolder
	entries, err := os.ReadDir(dir)
	if err != nil {
		return f, false
	}
	type transcript struct {
		id       string
		at, size int64
	}
	var ts []transcript
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || e.IsDir() || !protocol.IsSessionID(id) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		ts = append(ts, transcript{id, fi.ModTime().UnixMilli(), fi.Size()})
	}
	slices.SortFunc(ts, func(a, b transcript) int { return cmp.Compare(b.at, a.at) })
	for _, t := range ts[:min(len(ts), MaxHeads)] {
		h, err := hs.read(filepath.Join(dir, t.id+".jsonl"), t.size)
		if err != nil {
			continue
		}
		if f.Dir == "" && h.Cwd != "" && filepath.IsAbs(h.Cwd) {
			// The project folder's name is the cwd escaped: the cwd it
			// names must be the one this folder is for.
			if filepath.Base(dir) != claude.EscapeProjectPath(h.Cwd) {
				continue
			}
			f.Dir = h.Cwd
		}
		if h.Prompt == "" {
			continue // nothing was asked: nothing to resume
		}
		f.At = max(f.At, t.at)
		f.Sessions = append(f.Sessions, protocol.PastSession{ID: t.id, Prompt: protocol.Clip(h.Prompt, protocol.DaemonPromptBytes), At: t.at})
	}
	return f, f.Dir != ""
}

// realDir is dir with symbolic links resolved, if it is a folder.
func realDir(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%q is not an absolute path", dir)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a folder", dir)
	}
	return real, nil
}

// within reports whether path is root or below it (both real paths).
func within(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
