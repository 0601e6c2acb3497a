package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/lines"
)

// A Claude being stopped (stdin closed, then SIGTERM, then SIGKILL) may
// print what it never writes to its transcript: Claude Code 2.1.330,
// ended by SIGTERM while a Bash command runs, prints the command's result
// ("Exit code 137") and exits before it records it. The resumed Claude
// does not know that result: it records its repair of the call, and replay
// ends the call with it (mapper.Cut's ids). Sent, the printed result would
// be an end of the call that replay does not have, and the repair a second
// one. So what Claude prints of the conversation once it is being stopped
// waits in the queue (everything behind it with it) until Claude has
// exited; then only what its transcript holds goes out, and the cut that
// ends the stopped turn ends the rest as replay does.

// StopOutputMargin is how much longer than the stop itself (twice
// StopTimeout and outputHoldTimeout) what Claude printed while being
// stopped waits for Claude's exit: past it, it goes out unchecked.
const StopOutputMargin = 5 * time.Second

// stopOutput is what a Claude printed of the conversation while it was
// being stopped, and what its transcript holds once it has exited.
type stopOutput struct {
	mu   sync.Mutex
	held bool
	// written holds the keys of the conversation records Claude wrote
	// from its start (nil: not known yet, or the transcript was not read:
	// everything goes out).
	written *claude.Dedupe
}

// stopKey is the queue key that holds what p printed while stopping.
func (p *process) stopKey() string {
	return fmt.Sprintf("\x00stop:%p", p) // no tool id looks like it
}

// holdsStopOutput reports whether what p prints now waits for p's exit: p
// is being stopped, and its transcript can be read afterwards.
func (p *process) holdsStopOutput() bool {
	return p.stopping.Load() && p.startAt >= 0
}

// holdStopOutput queues recs, which Claude printed while being stopped,
// behind the stop hold. Called with mu held.
func (r *Remote) holdStopOutput(p *process, recs []*claude.Record) {
	p.stopOut.mu.Lock()
	p.stopOut.held = true
	p.stopOut.mu.Unlock()
	r.q.PushHeld(item{recs: recs, stop: &p.stopOut}, p.stopKey(), 2*r.opts.StopTimeout+outputHoldTimeout+StopOutputMargin)
}

// settle reads, once Claude has exited, which conversation records its
// transcript at path holds from offset at, if something printed waits for
// it. Called by the reader without mu (it reads the transcript).
func (s *stopOutput) settle(path string, at int64) {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if !held || path == "" || at < 0 {
		return
	}
	written, ok := conversationKeys(path, at)
	if !ok {
		return
	}
	s.mu.Lock()
	s.written = written
	s.mu.Unlock()
}

// keep returns the records of recs that may go out: every one while the
// transcript is not known; then those the transcript holds, and those it
// cannot tell about (a subagent's, records of ccrelay's own without a
// uuid or message id). dropped is how many it left out.
func (s *stopOutput) keep(recs []*claude.Record) (kept []*claude.Record, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		return recs, 0
	}
	for _, rec := range recs {
		if !mainConversation(rec) || (claude.Key(rec) == "" && claude.MessageKey(rec) == "") || s.written.Has(rec) {
			kept = append(kept, rec)
			continue
		}
		dropped++
	}
	return kept, dropped
}

// mainConversation reports whether rec is a user or assistant message of
// the main agent: what the main transcript holds.
func mainConversation(rec *claude.Record) bool {
	return (rec.Type == claude.TypeUser || rec.Type == claude.TypeAssistant) && !rec.IsSidechain && rec.ParentToolUseID == ""
}

// conversationKeys reads the main-agent messages of the transcript at path
// from offset at; ok is false when it cannot be read.
func conversationKeys(path string, at int64) (d *claude.Dedupe, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return nil, false
	}
	d = &claude.Dedupe{}
	lr := lines.NewReader(f, 64<<10, maxStreamLine)
	for {
		l, err := lr.Next()
		if err == io.EOF {
			return d, true
		}
		if err != nil {
			return nil, false
		}
		if l.TooLong || len(l.Data) == 0 {
			continue
		}
		rec, err := claude.Parse(bytes.Clone(l.Data))
		if err != nil || !mainConversation(rec) {
			continue
		}
		d.Seen(rec)
	}
}
