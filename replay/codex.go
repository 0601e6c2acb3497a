package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

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
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	lr := lines.NewReader(f, 64<<10, maxFirstLine)
	for {
		ln, err := lr.Next()
		if err != nil || ln.TooLong {
			return "", false
		}
		if len(bytes.TrimSpace(ln.Data)) == 0 {
			continue
		}
		r, err := codex.Parse(ln.Data)
		if err != nil || r.SessionMeta == nil {
			return "", false
		}
		id := r.SessionMeta.ID
		if id == "" {
			id = r.SessionMeta.SessionID
		}
		if !protocol.IsSessionID(id) {
			// The relay takes a UUID; a rollout's file name has it too.
			var ok bool
			if id, ok = codex.ThreadID(path); !ok {
				return "", false
			}
		}
		return id, true
	}
}

// runCodex replays a Codex rollout: every record in order, each ordinal
// once, through one Codex mapper.
func runCodex(ctx context.Context, s Session, opts Options, st *Stats, emit func(*protocol.Envelope) error) (*Stats, error) {
	maxLine := opts.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	if fi, err := os.Stat(s.Main); err == nil {
		st.TotalBytes = fi.Size()
	}
	f, err := os.Open(s.Main)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", s.Main, errors.Unwrap(err))
	}
	defer f.Close()
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
	lr := lines.NewReader(f, 256<<10, maxLine)
	seen := map[int64]struct{}{}
	var lastProgress int64
	for n := 1; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
		}
		ln, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read %s: %w", s.Main, err)
		}
		st.Bytes += ln.Size
		if ln.TooLong {
			st.Skipped = append(st.Skipped, Skip{s.Main, n, fmt.Sprintf("line of %s is longer than the %s limit; skipped",
				size(ln.Size), size(int64(maxLine)))})
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
			st.Skipped = append(st.Skipped, Skip{s.Main, n, reason})
			continue
		}
		st.Lines++
		if r.HasOrdinal {
			if _, dup := seen[r.Ordinal]; dup {
				st.Duplicates++
				continue
			}
			seen[r.Ordinal] = struct{}{}
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
		if err := send(mp.Map(r)); err != nil {
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
		e := &NothingReadError{File: s.Main, Skipped: len(st.Skipped)}
		if len(st.Skipped) > 0 {
			e.First = &st.Skipped[0]
		}
		return st, e
	}
	return st, nil
}
