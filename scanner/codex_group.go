package scanner

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/codex"
)

// A Codex subagent (multi_agent_v1 spawn_agent) runs in a thread of its
// own, whose rollout is written beside its parent's and whose session_meta
// names the parent thread (parent_thread_id). The follower finds those
// rollouts itself, in the folders of the rollouts it follows, and follows
// them with their root thread (the thread followed that is no one's
// subagent): their batches carry Parent, the root, whose session they are
// part of. The lines of a root and its subagents' threads are delivered
// merged by their time, as `ccrelay replay` reads them, so that mapping them
// live gives what replay gives.

// maxGroupScan bounds the rollouts of a folder judged for subagents.
const maxGroupScan = 10000

// groupMeta is what a rollout's session_meta says of its parent.
type groupMeta struct {
	parent string // "" when it is no one's subagent
}

// adoptChildren follows the rollouts, in the folders of those followed,
// whose session_meta names a followed thread as parent. It is called
// after the followed files were read in a pass, so that a subagent's
// rollout written before a parent's line read is followed before that
// line is delivered.
func (f *CodexFollower) adoptChildren() {
	if len(f.files) == 0 {
		return
	}
	if f.metas == nil {
		f.metas = map[string]groupMeta{}
	}
	// A rollout is in the folder of the day its thread started: a
	// subagent started after midnight is in the next day's, or today's
	// (a thread resumed days later).
	var dirs []string
	now := time.Now()
	for _, cf := range f.files {
		d := filepath.Dir(cf.path)
		for _, dir := range []string{d, codex.NextDayDir(d), codex.SameRootDayDir(d, now)} {
			if dir != "" && !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
	}
	var cands []string
	for _, d := range dirs {
		names, err := filepath.Glob(filepath.Join(d, "rollout-*.jsonl"))
		if err != nil {
			continue
		}
		slices.Sort(names)
		if len(names) > maxGroupScan {
			names = names[:maxGroupScan]
		}
		for _, p := range names {
			if _, ok := f.metas[p]; ok {
				if f.metas[p].parent != "" {
					cands = append(cands, p)
				}
				continue
			}
			parent, ok := readParent(p)
			if !ok {
				continue // its first line is not whole yet: judged at a later pass
			}
			f.metas[p] = groupMeta{parent: parent}
			if parent != "" {
				cands = append(cands, p)
			}
		}
	}
	// Files followed already whose parent is followed too (a subagent's
	// rollout announced with Follow) join their root, if nothing of them
	// was delivered yet.
	for _, cf := range f.files {
		if m, ok := f.metas[cf.path]; ok && m.parent != "" && cf.root == "" && !cf.delivered {
			if root := f.rootOf(m.parent); root != "" && root != cf.thread {
				cf.root = root
			}
		}
	}
	// A subagent's own subagents are followed with the same root: repeat
	// while a file is added.
	for added := true; added; {
		added = false
		for _, p := range cands {
			if f.followed(p) {
				continue
			}
			root := f.rootOf(f.metas[p].parent)
			if root == "" {
				continue
			}
			thread, ok := CodexThreadOf(p)
			if !ok || thread == root {
				continue
			}
			f.log.Info("following a subagent's thread with its parent", "thread", thread, "root", root, "file", p)
			f.add(p)
			for _, cf := range f.files {
				if cf.path == p {
					cf.root = root
					f.read(cf)
				}
			}
			added = true
		}
	}
}

// followed reports whether the file at p is followed.
func (f *CodexFollower) followed(p string) bool {
	for _, cf := range f.files {
		if cf.path == p {
			return true
		}
	}
	return false
}

// rootOf is the root of the followed thread's group ("" if it is not
// followed).
func (f *CodexFollower) rootOf(thread string) string {
	for _, cf := range f.files {
		if cf.thread == thread {
			if cf.root != "" {
				return cf.root
			}
			return cf.thread
		}
	}
	return ""
}

// readParent reads a rollout's first line and returns the parent thread
// its session_meta names ("" when its session_meta is another thread's
// than its name's); ok is false while that line is not whole.
func readParent(path string) (parent string, ok bool) {
	fh, err := OpenRegular(path)
	if err != nil {
		// Gone, or not to be read (not a regular file, no permission):
		// not a subagent of this group.
		return "", !errors.Is(err, os.ErrNotExist)
	}
	defer fh.Close()
	const most = 4 << 20 // session_meta embeds Codex's base instructions
	line, err := bufio.NewReaderSize(io.LimitReader(fh, most), 64<<10).ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) < most {
			return "", false
		}
		return "", true
	}
	r, err := codex.Parse(line)
	if err != nil || r.SessionMeta == nil {
		return "", true
	}
	if named, _ := CodexThreadOf(path); r.SessionMeta.ID != "" && !strings.EqualFold(r.SessionMeta.ID, named) {
		// Codex names a rollout by its thread: this one was copied or
		// renamed, and would be followed as the name's thread (as the
		// local watcher refuses it too).
		return "", true
	}
	return strings.ToLower(r.SessionMeta.ParentThreadID), true
}

// groups lists the followed files by root: each root first, then its
// subagents' files in name order (as replay orders them).
func (f *CodexFollower) groups() [][]*codexFile {
	var out [][]*codexFile
	for _, cf := range f.files {
		if cf.root != "" {
			continue
		}
		g := []*codexFile{cf}
		var kids []*codexFile
		for _, k := range f.files {
			if k.root == cf.thread {
				kids = append(kids, k)
			}
		}
		slices.SortFunc(kids, func(a, b *codexFile) int { return strings.Compare(a.path, b.path) })
		out = append(out, append(g, kids...))
	}
	return out
}

// passGroup delivers what the files of one group hold, in time order
// across the files (a line goes before another file's next line unless
// that is earlier; on equal times the file first in the group goes
// first), in batches of one file's consecutive lines. A file that holds
// nothing is read again before lines read after its last read go: a line
// it got written meanwhile may be earlier than those.
func (f *CodexFollower) passGroup(ctx context.Context, g []*codexFile) error {
	for {
		var best *codexFile
		for _, cf := range g {
			if len(cf.pending) == 0 {
				f.read(cf)
			}
			if len(cf.pending) > 0 && (best == nil || cf.pending[0].ts < best.pending[0].ts) {
				best = cf
			}
		}
		for _, cf := range g {
			if cf.retry && len(cf.pending) > 0 {
				best = cf // the lines whose delivery failed go again first
				break
			}
		}
		if best == nil {
			return nil
		}
		n := len(best.pending)
		if best.retry {
			n = best.sending
		} else {
			again := false
			for _, cf := range g {
				if cf != best && len(cf.pending) == 0 && cf.lastRead <= best.pending[0].seq {
					f.read(cf)
					again = true
				}
			}
			if again {
				continue
			}
			before := true // whether the other file comes before best in g
			for _, cf := range g {
				if cf == best {
					before = false
					continue
				}
				if len(cf.pending) == 0 {
					continue
				}
				head := cf.pending[0].ts
				for i, l := range best.pending[:n] {
					if l.ts > head || (l.ts == head && before) {
						n = i
						break
					}
				}
			}
			n = max(n, 1)
		}
		if err := f.deliver(ctx, best, n); err != nil {
			return err
		}
	}
}
