package launcher

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/lines"
	"github.com/ccrelay/ccrelay/protocol"
)

// Slash commands sent from the app. Claude Code runs them itself and
// prints little of them on stdout (2.1.330): not the command (the
// transcript has it as a <command-name> record), for /compact only its
// output line (echoed, <local-command-stdout>), and for /clear no echo at
// all but a conversation_reset naming the new session id, whose transcript
// then holds the command. What the transcript has is sent from there, in
// its order, so the app shows the command as replay does; a /clear moves
// the session to Claude's new session, as local mode follows it.

// isSlashCommand reports whether a prompt is a slash command Claude runs
// itself ("/compact keep it short"; not "/tmp/x is missing").
func isSlashCommand(text string) bool {
	t := strings.TrimSpace(text)
	if len(t) < 2 || t[0] != '/' {
		return false
	}
	name, _, _ := strings.Cut(t[1:], " ")
	if name == "" || strings.ContainsAny(name, "/.") {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':') {
			return false
		}
	}
	return true
}

// splitCommand returns a slash command's name (without its slash) and
// its arguments, trimmed.
func splitCommand(text string) (name, args string) {
	t := strings.TrimSpace(text)
	if i := strings.IndexFunc(t, unicode.IsSpace); i >= 0 {
		name, args = t[:i], strings.TrimSpace(t[i:])
	} else {
		name = t
	}
	return strings.TrimPrefix(name, "/"), args
}

// recordedCommand returns the name (without its slash) and arguments of
// a slash command as the transcript records it:
// <command-name>/x</command-name>…<command-args>y</command-args>.
func recordedCommand(text string) (name, args string, ok bool) {
	name = strings.TrimPrefix(claude.Markup(text, "command-name"), "/")
	if name == "" {
		return "", "", false
	}
	return name, claude.Markup(text, "command-args"), true
}

// noteCommand remembers where the main transcript ends when a slash
// command is written to Claude. Called with mu held.
func (r *Remote) noteCommand(text string) {
	if !isSlashCommand(text) || r.cmdAt >= 0 || r.opts.ProjectDir == "" {
		return
	}
	r.cmdAt, _ = r.transcriptEnd() // 0 when there is none yet
}

// commandRecords returns what Claude recorded of a slash command and did
// not print, up to the echo of its output (rec): the command itself, the
// summary of a compaction. Called by the reader without mu: it may wait
// for the transcript.
func (r *Remote) commandRecords(rec *claude.Record) []*claude.Record {
	r.mu.Lock()
	at := r.cmdAt
	r.cmdAt = -1
	path := claude.TranscriptPath(r.opts.ProjectDir, r.id)
	r.mu.Unlock()
	if at < 0 || rec.UUID == "" {
		return nil
	}
	recs, _ := readThrough(path, at, rec.UUID)
	if n := len(recs); n > 0 && recs[n-1].UUID == rec.UUID {
		recs = recs[:n-1] // printed: it follows
	}
	return recs
}

// localCommandRecords returns what Claude recorded of a slash command it
// ran itself and printed only the output of (no echo): the records from
// where the transcript ended when it was written up to the command.
// Called by the reader without mu: it may wait for the transcript.
func (r *Remote) localCommandRecords() []*claude.Record {
	r.mu.Lock()
	at := r.cmdAt
	path := claude.TranscriptPath(r.opts.ProjectDir, r.id)
	r.mu.Unlock()
	if at < 0 {
		return nil
	}
	deadline := time.Now().Add(SubagentFileWait)
	for {
		recs, _ := readMessages(path, at, "")
		for i, rec := range recs {
			if isCommandLine(rec) {
				r.mu.Lock()
				r.cmdAt = -1
				r.mu.Unlock()
				return recs[:i+1]
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(subagentFilePoll)
	}
}

// isCommandLine reports whether rec is the record of a slash command the
// user gave (<command-name>…).
func isCommandLine(rec *claude.Record) bool {
	if rec.Type != claude.TypeUser || rec.IsMeta || rec.Message == nil {
		return false
	}
	c := rec.Message.Content
	if c.IsString {
		return strings.Contains(c.String, "<command-name>")
	}
	for _, b := range c.Blocks {
		if b.Type == "text" && b.Text != nil && strings.Contains(*b.Text, "<command-name>") {
			return true
		}
	}
	return false
}

// readThrough reads the main-chain messages of the transcript at path from
// offset at up to and including the one with uuid stop, waiting for it up
// to SubagentFileWait (Claude writes the file and stdout separately); at
// most MaxRepairRecords. found says whether stop was read.
func readThrough(path string, at int64, stop string) (recs []*claude.Record, found bool) {
	deadline := time.Now().Add(SubagentFileWait)
	for {
		recs, found = readMessages(path, at, stop)
		if found || time.Now().After(deadline) {
			return recs, found
		}
		time.Sleep(subagentFilePoll)
	}
}

// readMessages reads the main-chain messages of the transcript at path from
// offset at up to and including the one with uuid stop.
func readMessages(path string, at int64, stop string) (recs []*claude.Record, found bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return nil, false
	}
	lr := lines.NewReader(f, 64<<10, maxStreamLine)
	for len(recs) < MaxRepairRecords {
		l, err := lr.Next()
		if err != nil || !l.Complete {
			break
		}
		if l.TooLong || len(l.Data) == 0 {
			continue
		}
		rec, err := claude.Parse(bytes.Clone(l.Data))
		if err != nil || rec.UUID == "" || rec.IsSidechain || (rec.Type != claude.TypeUser && rec.Type != claude.TypeAssistant) {
			continue
		}
		recs = append(recs, rec)
		if rec.UUID == stop {
			return recs, true
		}
	}
	return recs, false
}

// clearRecord is the record of the /clear command a conversation_reset
// announces (nil when it does not name it). Claude writes it to the new
// session's transcript only with the next prompt (the file starts then):
// it is rebuilt here, with its uuid, as Claude writes it, so that the app
// sees the command at once and with replay's id.
func clearRecord(m *claude.StreamMessage) *claude.Record {
	if m.Reset == nil || m.Reset.UserMessageUUID == "" {
		return nil
	}
	var head struct {
		Timestamp string `json:"timestamp"`
	}
	_ = json.Unmarshal(m.Raw, &head)
	line, err := json.Marshal(map[string]any{"type": "user", "uuid": m.Reset.UserMessageUUID,
		"timestamp": head.Timestamp, "isSidechain": false, "message": map[string]any{"role": "user",
			"content": "<command-name>/clear</command-name>\n            <command-message>clear</command-message>\n            <command-args></command-args>"}})
	if err != nil {
		return nil
	}
	rec, err := claude.Parse(line)
	if err != nil {
		return nil
	}
	return rec
}

// cleared handles a /clear's conversation_reset (m): the /clear prompt is
// taken (Claude does not echo it), and the session Claude leaves ends with
// a note saying so; the command itself goes to the new session, which the
// next init names (movedTo). Called with mu held.
func (r *Remote) cleared(m *claude.StreamMessage) {
	r.flushStash()
	if out := r.conv.Convert(m); len(out) > 0 {
		r.q.Push(item{recs: out})
	}
	r.q.Push(item{close: protocol.StatusCompleted, time: time.Now().UnixMilli()})
	if r.queued > 0 {
		r.queued--
	}
	r.clearCmd = clearRecord(m)
	r.publish()
}

// movesTo reports the session Claude moved to, as its init names it ("":
// the same one). After a /clear Claude goes on in a new session id (not
// the conversation_reset's new_conversation_id: 2.1.330 writes the
// transcript under the init's). Called by the reader: r.id is its own.
func (r *Remote) movesTo(m *claude.StreamMessage) string {
	if m.Type != claude.StreamSystem || m.Subtype != claude.SystemInit || m.SessionID == r.id || !ValidSessionID(m.SessionID) {
		return ""
	}
	return m.SessionID
}

// moveTo follows Claude to session id, as local mode follows a /clear:
// what follows (first the /clear command) goes to the new session, whose
// transcript crash repairs and subagents are read from, and a Claude
// started again resumes it. Called by the reader without mu (OnSession
// may take its time).
func (r *Remote) moveTo(p *process, id string) {
	if r.opts.OnSession != nil {
		r.opts.OnSession(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushMessage()
	r.flushStash()
	r.log.Info("remote: Claude goes on in a new session", "session", r.id, "new", id)
	if r.events != nil {
		// The session left is idle: nothing more runs in it.
		st := r.snapshot()
		st.Status, st.Permissions = StatusIdle, nil
		r.q.Push(item{state: &st})
	}
	r.q.Push(item{session: id})
	r.id = id
	// Its transcript tells whether a Claude started again resumes it
	// (Claude writes it with the next prompt).
	r.opts.Resume = false
	r.conv = NewConverter(id)
	r.files = newSubFiles(r.opts.ProjectDir, id, SubagentFileWait, r.log)
	r.crashAt = -1
	if r.cmdAt >= 0 && r.clearCmd == nil {
		// A command Claude records in the new session (2.1.197 writes
		// its /clear there, and prints no conversation_reset).
		r.cmdAt = 0
	} else {
		r.cmdAt = -1
	}
	clear(r.repaired)
	// The prompts this Claude takes from now on are in the new transcript.
	p.transcriptAt, p.startAt = 0, 0
	p.newTranscript()
	if rec := r.clearCmd; rec != nil {
		r.clearCmd = nil
		rec.SessionID = id
		r.q.Push(item{recs: r.conv.conversation(rec)})
	}
	r.publish()
}

// commandOutput reports whether rec is the output of a slash command
// (<local-command-stdout>, …), which Claude echoes in place of the command.
func commandOutput(rec *claude.Record) bool {
	if rec.Type != claude.TypeUser || rec.Message == nil {
		return false
	}
	c := rec.Message.Content
	text := c.String
	if !c.IsString {
		text = ""
		for _, b := range c.Blocks {
			if b.Type == "text" && b.Text != nil {
				text = *b.Text
				break
			}
		}
	}
	return strings.HasPrefix(strings.TrimSpace(text), "<local-command-")
}
