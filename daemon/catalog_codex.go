package daemon

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// Bounds of a scan of Codex's rollouts.
const (
	// MaxCodexDays bounds the day folders (sessions/YYYY/MM/DD) listed,
	// the most recent first.
	MaxCodexDays = 366
	// MaxCodexHeads bounds the rollouts whose first lines are read in one
	// scan (the most recently changed first); each folder keeps at most
	// MaxHeads threads.
	MaxCodexHeads = 4 * MaxHeads * 16
)

// scanCodex adds Codex's threads (codexHome/sessions rollouts) to c: each
// one's folder (its session_meta's cwd), first prompt and last change, with
// agent codex; a folder Claude Code does not know is added. Subagents'
// threads (resumed with their parent's) and threads nothing was asked in
// are left out; so is what cannot be read.
func scanCodex(c *catalog, codexHome string, hs heads) {
	type rollout struct {
		path     string
		at, size int64
	}
	var rs []rollout
	root := codex.SessionsDir(codexHome)
	var days []string
	for _, y := range readDirNames(root) {
		for _, m := range readDirNames(filepath.Join(root, y)) {
			for _, d := range readDirNames(filepath.Join(root, y, m)) {
				days = append(days, filepath.Join(root, y, m, d))
			}
		}
	}
	slices.Sort(days)
	slices.Reverse(days)
	for _, day := range days[:min(len(days), MaxCodexDays)] {
		entries, err := os.ReadDir(day)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || !codex.IsRolloutName(e.Name()) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			rs = append(rs, rollout{filepath.Join(day, e.Name()), fi.ModTime().UnixMilli(), fi.Size()})
		}
	}
	slices.SortFunc(rs, func(a, b rollout) int { return cmp.Compare(b.at, a.at) })
	byDir := map[string]int{} // real path -> index in c.folders
	for i, f := range c.folders {
		if real, err := realDir(f.Dir); err == nil {
			byDir[real] = i
		}
	}
	counted := map[string]int{} // real path -> Codex threads added
	seen := map[string]bool{}   // thread ids
	for _, r := range rs[:min(len(rs), MaxCodexHeads)] {
		h, err := hs.readCodex(r.path, r.size)
		if err != nil || h.Parent != "" || h.Prompt == "" || !filepath.IsAbs(h.Cwd) {
			continue
		}
		id, _ := codex.ThreadID(r.path)
		if !strings.EqualFold(h.ThreadID, id) || !protocol.IsSessionID(id) || seen[id] {
			continue // a file that is not its thread's, or a second file of one thread
		}
		seen[id] = true
		real, err := realDir(h.Cwd)
		if err != nil || counted[real] >= MaxHeads {
			continue
		}
		counted[real]++
		i, ok := byDir[real]
		if !ok {
			i = len(c.folders)
			byDir[real] = i
			c.known[real] = true
			c.folders = append(c.folders, protocol.DaemonFolder{Dir: h.Cwd})
		}
		f := &c.folders[i]
		f.At = max(f.At, r.at)
		f.Sessions = append(f.Sessions, protocol.PastSession{ID: id, Prompt: protocol.Clip(h.Prompt, protocol.DaemonPromptBytes), At: r.at, Agent: protocol.AgentCodex})
	}
	for i := range c.folders {
		f := &c.folders[i]
		slices.SortStableFunc(f.Sessions, func(a, b protocol.PastSession) int { return cmp.Compare(b.At, a.At) })
		f.Sessions = f.Sessions[:min(len(f.Sessions), MaxHeads)]
	}
	slices.SortStableFunc(c.folders, func(a, b protocol.DaemonFolder) int { return cmp.Compare(b.At, a.At) })
}

// readDirNames lists the folders in dir (none when it cannot be read).
func readDirNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}
