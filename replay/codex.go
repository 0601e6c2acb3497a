package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/lines"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

// maxFirstLine bounds the first line read to tell a Codex rollout from a
// Claude transcript (Codex's session_meta embeds its base instructions:
// 22 KB in 0.169.0).
const maxFirstLine = 4 << 20

// CodexThread tells whether path is a Codex rollout: its first line is a
// session_meta record. It returns the thread id the record names. Only a
// regular file is looked at (a pipe cannot be read twice): a rollout given
// through a pipe is read as a Claude transcript.
func CodexThread(path string) (string, bool) {
	meta, ok := codexMeta(path)
	if !ok {
		return "", false
	}
	return meta.ID, true
}

// codexMeta reads the session_meta a rollout starts with; its ID is the
// thread id (from the file's name when the record's is not a UUID).
func codexMeta(path string) (*codex.SessionMeta, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	lr := lines.NewReader(f, 64<<10, maxFirstLine)
	for {
		ln, err := lr.Next()
		if err != nil || ln.TooLong {
			return nil, false
		}
		if len(bytes.TrimSpace(ln.Data)) == 0 {
			continue
		}
		r, err := codex.Parse(ln.Data)
		if err != nil || r.SessionMeta == nil {
			return nil, false
		}
		meta := r.SessionMeta
		if meta.ID == "" {
			meta.ID = meta.SessionID
		}
		if !protocol.IsSessionID(meta.ID) {
			// The relay takes a UUID; a rollout's file name has it too.
			id, ok := codex.ThreadID(path)
			if !ok {
				return nil, false
			}
			meta.ID = id
		}
		return meta, true
	}
}

// codexFile reads the records of one rollout in order, one ahead.
type codexFile struct {
	path    string
	thread  string // "" for the session's own rollout
	f       *os.File
	lr      *lines.Reader
	line    int
	maxLine int
	seen    map[int64]struct{}
	maxOrd  int64 // the highest ordinal kept (-1: none)
	next    *codex.Record
	lastTS  int64
	done    bool
}

// advance loads the next usable record of cf into cf.next.
func (cf *codexFile) advance(st *Stats) error {
	cf.next = nil
	for !cf.done {
		ln, err := cf.lr.Next()
		if err == io.EOF {
			cf.done = true
			return nil
		}
		if err != nil {
			cf.done = true
			return fmt.Errorf("read %s: %w", cf.path, err)
		}
		cf.line++
		st.Bytes += ln.Size
		if ln.TooLong {
			st.skip(Skip{cf.path, cf.line, fmt.Sprintf("line of %s is longer than the %s limit; skipped",
				size(ln.Size), size(int64(cf.maxLine)))})
			continue
		}
		if len(bytes.TrimSpace(ln.Data)) == 0 {
			continue
		}
		r, err := codex.Parse(ln.Data)
		if err != nil {
			reason := err.Error()
			if !ln.Complete {
				reason = "last line is incomplete (" + reason + ")"
			} else if !isText(ln.Data) {
				reason = "binary data, not JSON"
			}
			st.skip(Skip{cf.path, cf.line, reason})
			continue
		}
		if r.HasOrdinal && r.Ordinal-max(cf.maxOrd, int64(cf.line-1)) > codex.MaxOrdinalGap {
			// As the live follower does: Codex numbers a rollout's lines
			// from 0 (scanner.MaxCodexOrdinalGap).
			st.skip(Skip{cf.path, cf.line, fmt.Sprintf("its ordinal %d is far past the lines before it", r.Ordinal)})
			continue
		}
		st.Lines++
		if r.HasOrdinal {
			cf.maxOrd = max(cf.maxOrd, r.Ordinal)
			if _, dup := cf.seen[r.Ordinal]; dup {
				st.Duplicates++
				continue
			}
			cf.seen[r.Ordinal] = struct{}{}
		}
		if r.Timestamp > 0 {
			cf.lastTS = r.Timestamp
		}
		cf.next = r
		return nil
	}
	return nil
}

// ts orders the files' records: a record without a time sorts with the
// record before it.
func (cf *codexFile) ts() int64 {
	if cf.next.Timestamp > 0 {
		return cf.next.Timestamp
	}
	return cf.lastTS
}

// runCodex replays a Codex rollout, with the rollouts of its subagent
// threads merged in by time: every record in order, each ordinal of a file
// once, through one Codex mapper.
func runCodex(ctx context.Context, s Session, opts Options, st *Stats, emit func(*protocol.Envelope) error) (*Stats, error) {
	maxLine := opts.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	var files []*codexFile
	defer func() {
		for _, cf := range files {
			cf.f.Close()
		}
	}()
	for i, p := range s.Files() {
		if fi, err := os.Stat(p); err == nil {
			st.TotalBytes += fi.Size()
		}
		f, err := os.Open(p)
		if err != nil {
			return st, fmt.Errorf("open %s: %w", p, errors.Unwrap(err))
		}
		cf := &codexFile{path: p, f: f, lr: lines.NewReader(f, 256<<10, maxLine), maxLine: maxLine, seen: map[int64]struct{}{}, maxOrd: -1}
		files = append(files, cf)
		if i > 0 {
			id, ok := CodexThread(p)
			if !ok {
				return st, fmt.Errorf("%s is not a Codex rollout", p)
			}
			cf.thread = id
		}
		if err := cf.advance(st); err != nil {
			return st, err
		}
	}
	mp := mapper.NewCodex(s.ID)
	send := func(envs []protocol.Envelope) error {
		for i := range envs {
			st.Envelopes[envs[i].Ev.T]++
			if err := emit(&envs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	var lastProgress int64
	for n := 1; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
		}
		var best *codexFile
		for _, cf := range files {
			if cf.next != nil && (best == nil || cf.ts() < best.ts()) {
				best = cf
			}
		}
		if best == nil {
			break
		}
		r := best.next
		if err := best.advance(st); err != nil {
			return st, err
		}
		switch r.Type {
		case codex.TypeEventMsg, codex.TypeResponseItem, codex.TypeTokenUsageRecord, codex.TypeTurnContext:
			st.Conversation++
		default:
			name := r.Type
			if name == "" {
				name = "(no type)"
			}
			st.Other[name]++
		}
		var envs []protocol.Envelope
		if best.thread == "" {
			envs = mp.Map(r)
		} else {
			envs = mp.MapThread(best.thread, r)
		}
		if err := send(envs); err != nil {
			return st, err
		}
		if opts.Progress != nil && st.Bytes-lastProgress > 1<<20 {
			lastProgress = st.Bytes
			opts.Progress(st.Bytes, st.TotalBytes)
		}
	}
	if err := send(mp.Flush()); err != nil {
		return st, err
	}
	if opts.End != "" {
		if err := send(mp.Close(opts.End)); err != nil {
			return st, err
		}
	}
	ms := mp.Stats()
	st.Turns, st.Subagents = ms.Turns, ms.Subagents
	if opts.Progress != nil {
		opts.Progress(st.Bytes, st.TotalBytes)
	}
	if st.Lines == 0 {
		e := &NothingReadError{File: s.Main, Skipped: st.skipped()}
		if len(st.Skipped) > 0 {
			e.First = &st.Skipped[0]
		}
		return st, e
	}
	return st, nil
}

// maxSubagentScan bounds the rollouts looked at for a thread's subagents.
const maxSubagentScan = 10000

// CodexSubagentDirs are the folders the rollouts of the subagents of the
// thread whose rollout is main are looked for in: its own, and, when it is
// a day folder (sessions/YYYY/MM/DD: the day a thread started), the next
// day's (a subagent started after midnight) and that of the day main was
// last written (a thread resumed days later), as the live follower looks
// (scanner.CodexFollower).
func CodexSubagentDirs(main string) []string {
	dir := filepath.Dir(main)
	dirs := []string{dir}
	more := []string{codex.NextDayDir(dir)}
	if fi, err := os.Stat(main); err == nil {
		more = append(more, codex.SameRootDayDir(dir, fi.ModTime()))
	}
	for _, d := range more {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// CodexSubagents lists the rollouts of the subagent threads of thread id
// (and of theirs) in dirs (CodexSubagentDirs): rollouts whose
// session_meta names a parent among them, in name order.
func CodexSubagents(dirs []string, id string) ([]string, error) {
	var names []string
	for _, dir := range dirs {
		in, err := filepath.Glob(filepath.Join(dir, "rollout-*.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("list the rollouts in %s: %w", dir, err)
		}
		names = append(names, in...)
	}
	sort.Strings(names)
	if len(names) > maxSubagentScan {
		names = names[:maxSubagentScan]
	}
	parents := map[string]string{} // thread -> its parent
	files := map[string]string{}
	for _, p := range names {
		meta, ok := codexMeta(p)
		if !ok || meta.ParentThreadID == "" {
			continue
		}
		parents[meta.ID] = meta.ParentThreadID
		files[meta.ID] = p
	}
	var out []string
	for thread, p := range files {
		// A descendant of id, through at most a few levels.
		for up, depth := parents[thread], 0; up != "" && depth < 16; up, depth = parents[up], depth+1 {
			if up == id {
				out = append(out, p)
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
