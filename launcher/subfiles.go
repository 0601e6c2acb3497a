package launcher

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/scanner"
)

// SubagentFileWait is how long remote mode waits for a foreground
// subagent's transcript to hold what Claude just printed of it (Claude
// writes the file and stdout separately), and at the subagent's end for its
// final message. Past it, what stdout printed goes out alone.
const SubagentFileWait = 2 * time.Second

// subagentFilePoll is how often the transcript is read again while waiting.
const subagentFilePoll = 10 * time.Millisecond

// subFiles reads the transcripts of a session's foreground subagents, whose
// text and thinking Claude Code does not print on stdout (D22). It is owned
// by the remote reader goroutine: no locking.
type subFiles struct {
	dir  string // the session's subagents folder ("" when unknown)
	wait time.Duration
	log  *slog.Logger
	subs map[string]*subFile // Agent tool_use id -> its transcript
}

// subFile is one foreground subagent's transcript being read.
type subFile struct {
	agentID string
	tail    *scanner.Tail
	read    []*claude.Record // conversation records read, not yet sent
	sent    map[string]bool  // uuids sent (from the file or stdout)
	missing bool             // the file did not appear within wait once
}

func newSubFiles(projectDir, session string, wait time.Duration, log *slog.Logger) *subFiles {
	s := &subFiles{wait: wait, log: log, subs: map[string]*subFile{}}
	if projectDir != "" {
		s.dir = claude.SubagentDir(projectDir, session)
	}
	return s
}

// follows reports whether the transcript of the subagent of Agent call
// toolUseID is read here (a foreground subagent's).
func (s *subFiles) follows(toolUseID string) bool { return s.subs[toolUseID] != nil }

// started begins reading the transcript of a foreground subagent.
func (s *subFiles) started(toolUseID, agentID string) {
	if s.dir == "" || toolUseID == "" || agentID == "" || s.subs[toolUseID] != nil {
		return
	}
	t := scanner.NewTail(filepath.Join(s.dir, "agent-"+agentID+".jsonl"), scanner.Position{})
	s.subs[toolUseID] = &subFile{agentID: agentID, tail: t, sent: map[string]bool{}}
}

// before is called with a subagent record Claude printed: it returns the
// records of the subagent's transcript that come before it and were not
// sent yet, in the transcript's order, and the record to send in its place
// (the transcript's copy, which has the final usage and stop reason), or
// nil when it was sent already.
func (s *subFiles) before(rec *claude.Record) (prior []*claude.Record, self *claude.Record) {
	f := s.subs[rec.ParentToolUseID]
	if f == nil || rec.UUID == "" {
		return nil, rec
	}
	if f.sent[rec.UUID] {
		return nil, nil
	}
	f.readUntil(s, func() bool { return f.has(rec.UUID) })
	self = rec
	for len(f.read) > 0 {
		r := f.read[0]
		f.read = f.read[1:]
		if f.sent[r.UUID] {
			continue
		}
		f.sent[r.UUID] = true
		r = f.adopt(r, rec.ParentToolUseID)
		if r.UUID == rec.UUID {
			self = r
			break
		}
		prior = append(prior, r)
	}
	f.sent[rec.UUID] = true
	return prior, self
}

// ended is called when the subagent of Agent call toolUseID is over: it
// returns what its transcript holds that was not sent, waiting (up to the
// limit) for its final message, and forgets the subagent.
func (s *subFiles) ended(toolUseID string) []*claude.Record {
	f := s.subs[toolUseID]
	if f == nil {
		return nil
	}
	delete(s.subs, toolUseID)
	f.readUntil(s, f.finished)
	var out []*claude.Record
	for _, r := range f.read {
		if !f.sent[r.UUID] {
			f.sent[r.UUID] = true
			out = append(out, f.adopt(r, toolUseID))
		}
	}
	f.read = nil
	return out
}

// has reports whether the record with uuid was read (sent or not).
func (f *subFile) has(uuid string) bool {
	if f.sent[uuid] {
		// Sent from the file already, so read.
		return true
	}
	for _, r := range f.read {
		if r.UUID == uuid {
			return true
		}
	}
	return false
}

// finished reports whether the last conversation record read is the
// subagent's final answer: an assistant message that does not go on to a
// tool.
func (f *subFile) finished() bool {
	if len(f.read) == 0 {
		return false
	}
	last := f.read[len(f.read)-1]
	if last.Type != claude.TypeAssistant || last.Message == nil {
		return false
	}
	for _, b := range last.Message.Content.Blocks {
		if b.Type == "tool_use" {
			return false
		}
	}
	var stop struct {
		Message struct {
			StopReason *string `json:"stop_reason"`
		} `json:"message"`
	}
	return json.Unmarshal(last.Raw, &stop) == nil && stop.Message.StopReason != nil && *stop.Message.StopReason != "tool_use"
}

// readUntil reads what the transcript gained until done holds, polling up
// to the wait. A file that never appeared is not waited for again.
func (f *subFile) readUntil(s *subFiles, done func() bool) {
	deadline := time.Now().Add(s.wait)
	for {
		_, err := f.tail.ReadNew(func(l scanner.Line) error {
			if l.TooLong || len(l.Data) == 0 {
				return nil
			}
			r, err := claude.Parse(append([]byte(nil), l.Data...))
			if err != nil {
				s.log.Warn("remote: unreadable line in a subagent transcript", "file", f.tail.Path, "line", l.Num, "err", err)
				return nil
			}
			if (r.Type == claude.TypeUser || r.Type == claude.TypeAssistant) && r.UUID != "" {
				f.read = append(f.read, r)
			}
			return nil
		})
		exists := err == nil || !errors.Is(err, os.ErrNotExist)
		if err != nil && exists {
			s.log.Warn("remote: reading a subagent transcript failed", "file", f.tail.Path, "err", err)
		}
		if done() || (f.missing && !exists) || time.Now().After(deadline) {
			if !exists {
				f.missing = true
			}
			return
		}
		time.Sleep(subagentFilePoll)
	}
}

// adopt makes a transcript record look like what stream-json prints of a
// subagent: it names the Agent call it belongs to.
func (f *subFile) adopt(r *claude.Record, toolUseID string) *claude.Record {
	r.ParentToolUseID = toolUseID
	r.IsSidechain = true
	if r.AgentID == "" {
		r.AgentID = f.agentID
	}
	return r
}

// toolUseID is the Agent call of a subagent named by its call or its agent
// id (task_updated names only the latter).
func (s *subFiles) toolUseID(toolUseID, agentID string) string {
	if toolUseID != "" {
		return toolUseID
	}
	for id, f := range s.subs {
		if f.agentID == agentID {
			return id
		}
	}
	return ""
}

// endAll returns what the transcripts of the subagents still open hold
// that was not sent, without waiting (Claude is gone), and forgets them.
func (s *subFiles) endAll() []*claude.Record {
	var out []*claude.Record
	wait := s.wait
	s.wait = 0
	defer func() { s.wait = wait }()
	for id := range s.subs {
		out = append(out, s.ended(id)...)
	}
	return out
}
