package launcher

import (
	"os"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
)

// exited handles the end of a Claude process. An end we did not ask for
// closes the open turn as failed with a note saying why; the next prompt
// starts a fresh process on the same session.
func (r *Remote) exited(p *process) { r.exitedWith(p, nil, nil) }

// exitedWith is exited after sending leftover, what subagents' transcripts
// held that Claude had not printed, and taken, the prompts Claude took
// without echoing them (takenAtExit): their turn, open now, ends with the
// rest.
func (r *Remote) exitedWith(p *process, leftover, taken []*claude.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushMessage()
	// What p printed while being stopped goes now, as far as its
	// transcript holds it (settled).
	r.q.Release(p.stopKey())
	for _, x := range leftover {
		r.q.Push(item{recs: r.conv.conversation(x)})
	}
	for _, x := range taken {
		r.q.Push(item{recs: r.conv.conversation(x)})
		r.turnOpen = true
	}
	if r.proc != p {
		return
	}
	r.proc = nil
	r.pending = nil
	// Control requests still waiting see p.exited and give up.
	clear(r.waiters)
	if p.stopping.Load() {
		return
	}
	reason := p.reason()
	r.log.Warn("remote: claude stopped", "session", r.id, "reason", reason)
	r.state.Error = "Claude Code stopped: " + reason
	r.flushStash()
	if r.turnOpen {
		// Nobody interrupted: the calls ended because Claude did. The
		// mapper ends them (the converter forgets them), with the ids
		// the resumed Claude's repair of the turn maps to (mapper.Cut).
		r.conv.Closed("")
		r.q.Push(item{cut: &mapper.Cut{Status: protocol.StatusFailed, Result: ExitedMidToolText(reason),
			Note: "Claude Code stopped unexpectedly: " + reason, Source: "exit:" + protocol.New()}, time: time.Now().UnixMilli()})
	}
	r.q.Flush()
	r.turnOpen, r.queued = false, 0
	r.state.Tasks, r.taskIDs = nil, map[string]string{} // they ended with Claude
	clear(r.tasks)
	clear(r.taskCalls)
	clear(r.stopping)
	r.publish()
}

// MaxRepairRecords bounds the records read from the main transcript after
// a crash (the repairs the resumed Claude writes); the rest is left to
// local mode's scanner.
const MaxRepairRecords = 1000

// markResume keeps the size of the main transcript as Claude is started
// to continue it: what it writes from there before the first message it
// prints is its repair of what the Claude before it left (repairs). Called
// with mu held.
func (r *Remote) markResume() {
	r.crashAt = -1
	if r.opts.ProjectDir == "" {
		return
	}
	if end, ok := r.transcriptEnd(); ok {
		r.crashAt = end
	}
}

// transcriptEnd is the size of the main transcript of r's session, when
// there is one. Called with mu held.
func (r *Remote) transcriptEnd() (int64, bool) {
	fi, err := os.Stat(claude.TranscriptPath(r.opts.ProjectDir, r.id))
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}

// repairs returns what the resumed Claude wrote to the transcript after
// the Claude before it ended (crashed, killed, stopped for a switch, with
// a ccrelay that stopped) and before rec, the first message it prints (the
// results it records for calls left unfinished, "No response requested."),
// which it does not print: the mapper takes them as Claude's bookkeeping
// (mapper.Cut), and live stays equal to replay.
// Called by the reader without mu: it may wait for the transcript
// (SubagentFileWait).
func (r *Remote) repairs(rec *claude.Record) []*claude.Record {
	r.mu.Lock()
	at := r.crashAt
	r.crashAt = -1
	r.mu.Unlock()
	if at < 0 {
		return nil
	}
	// rec is read too (the transcript holds it after the repairs), but it is
	// not one of them.
	recs, found := readThrough(claude.TranscriptPath(r.opts.ProjectDir, r.id), at, rec.UUID)
	if found {
		recs = recs[:len(recs)-1]
	}
	return recs
}

// ExitedMidToolText is the result of a tool call that was running when
// Claude Code ended by itself (crashed, killed): what happened, with how
// it ended (reason: "signal: killed", "exit status 1: …").
func ExitedMidToolText(reason string) string {
	return "Claude Code exited while this tool ran (" + reason + "); the tool did not finish."
}
