package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/lines"
)

// What Claude Code has of a session is what its transcript holds, not what
// it printed: Claude prints its init before it writes anything, and writes
// a prompt long before it echoes it (2.1.330 echoes a prompt once the model
// answers). A Claude killed in between leaves a session that --resume
// refuses ("No conversation found with session ID") and a prompt that the
// next Claude has in its context although it was never echoed.

// transcriptState is what a session's main transcript holds.
type transcriptState int

const (
	// transcriptMissing: no file; Claude starts the session with
	// --session-id.
	transcriptMissing transcriptState = iota
	// transcriptNoMessage: a file without a user or assistant message
	// (Claude killed between its first bookkeeping lines and the prompt):
	// Claude refuses both --resume ("No conversation found") and
	// --session-id ("already in use").
	transcriptNoMessage
	// transcriptMessages: Claude continues the session with --resume.
	transcriptMessages
)

// MaxSessionProbe bounds what is read of a transcript to tell whether it
// holds a message. The first prompt comes within a few lines; a longer
// file without one is taken as holding one (--resume, as before).
const MaxSessionProbe = 8 << 20

// readTranscriptState tells what the transcript at path holds.
func readTranscriptState(path string) (transcriptState, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return transcriptMissing, nil
	}
	if err != nil {
		return transcriptMissing, fmt.Errorf("read the session's transcript: %w", err)
	}
	defer f.Close()
	lr := lines.NewReader(io.LimitReader(f, MaxSessionProbe), 64<<10, maxStreamLine)
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return transcriptMissing, fmt.Errorf("read the session's transcript: %w", err)
		}
		if l.TooLong || len(l.Data) == 0 || !l.Complete {
			continue
		}
		if isMessage(l.Data) {
			return transcriptMessages, nil
		}
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > MaxSessionProbe {
		return transcriptMessages, nil
	}
	return transcriptNoMessage, nil
}

// isMessage reports whether a transcript line is a user or assistant
// message.
func isMessage(line []byte) bool {
	if !bytes.Contains(line, []byte(`"type"`)) {
		return false
	}
	rec, err := claude.Parse(bytes.Clone(line))
	return err == nil && rec.UUID != "" && (rec.Type == claude.TypeUser || rec.Type == claude.TypeAssistant)
}

// resumeSession tells how Claude is to start: continuing the session
// (--resume) when its transcript holds a message, creating it
// (--session-id) when there is none. A transcript without a message is set
// aside (renamed *.jsonl.unused): Claude would refuse both. Without a
// project folder, or with no transcript where the caller said the session
// exists, the caller's word and what Claude printed decide. Called with mu
// held.
func (r *Remote) resumeSession() (bool, error) {
	if r.opts.ProjectDir == "" {
		return r.opts.Resume || r.initSeen, nil
	}
	path := claude.TranscriptPath(r.opts.ProjectDir, r.id)
	st, err := readTranscriptState(path)
	if err != nil {
		return false, err
	}
	switch st {
	case transcriptMessages:
		return true, nil
	case transcriptNoMessage:
		if err := os.Rename(path, path+".unused"); err != nil {
			return false, fmt.Errorf("set aside the session's transcript, which holds no message: %w", err)
		}
		r.log.Warn("remote: the session's transcript holds no message (Claude stopped before writing the prompt); set aside, the session starts anew", "session", r.id, "file", path+".unused")
		return false, nil
	}
	return r.opts.Resume, nil
}

// hasSession reports whether Claude has the session: its transcript holds
// a message (or, without a project folder, Claude printed its init). A
// Claude started after this continues it.
func (r *Remote) hasSession() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts.ProjectDir == "" {
		return r.opts.Resume || r.initSeen
	}
	st, err := readTranscriptState(claude.TranscriptPath(r.opts.ProjectDir, r.id))
	if err != nil {
		return r.opts.Resume
	}
	return st == transcriptMessages || (st == transcriptMissing && r.opts.Resume)
}

// MaxTakenRecords bounds the prompts read from the transcript when Claude
// ended (takenAtExit).
const MaxTakenRecords = MaxUntakenPrompts

// takenAtExit counts as taken the prompts Claude ended with in its
// transcript without having echoed them (Claude Code 2.1.330 writes a
// prompt at once and echoes it when the model answers: a Claude killed
// while it waits for the model has the prompt, and the next one has it in
// its context), and returns their records, to be sent with the
// transcript's ids (live = replay). Called by the reader once p is reaped,
// before p is seen to have exited.
func (r *Remote) takenAtExit(p *process) []*claude.Record {
	texts, lastEcho := p.notEchoed()
	if len(texts) == 0 || p.transcriptAt < 0 {
		return nil
	}
	recs, n := promptsWritten(claude.TranscriptPath(r.opts.ProjectDir, r.id), p.transcriptAt, lastEcho, texts)
	if n > 0 {
		p.promptsEchoed(n, "")
		r.log.Info("remote: Claude ended with prompts it had taken and not echoed", "session", r.id, "prompts", n)
	}
	return recs
}

// echoedAt moves where takenAtExit starts reading to the end of the
// transcript as it is at an echo: what Claude writes of later prompts comes
// after (the echoed prompt itself may too: Claude writes its transcript in
// batches). A long session is then not read again from the start. Called
// by the reader.
func (r *Remote) echoedAt(p *process) {
	if p.transcriptAt < 0 {
		return
	}
	if fi, err := os.Stat(claude.TranscriptPath(r.opts.ProjectDir, r.id)); err == nil && fi.Size() > p.transcriptAt {
		p.transcriptAt = fi.Size()
	}
}

// promptsWritten reads the transcript at path from offset at for the
// prompts texts, in order, after the prompt whose uuid is after (if it is
// there: what comes before it is older): the records that hold them and
// how many of texts they hold. Claude takes prompts in the order written,
// several queued ones as one message with a text block each ("second\n",
// "third").
func promptsWritten(path string, at int64, after string, texts []string) (recs []*claude.Record, n int) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return nil, 0
	}
	lr := lines.NewReader(f, 64<<10, maxStreamLine)
	for {
		l, err := lr.Next()
		if err != nil || !l.Complete {
			break
		}
		if l.TooLong || len(l.Data) == 0 || !bytes.Contains(l.Data, []byte(`"user"`)) {
			continue
		}
		rec, err := claude.Parse(bytes.Clone(l.Data))
		if err != nil || rec.Type != claude.TypeUser || rec.UUID == "" {
			continue
		}
		if after != "" && rec.UUID == after {
			recs, n = nil, 0 // what came before was taken and echoed
			continue
		}
		if k := promptsIn(rec, texts[n:]); k > 0 && len(recs) < MaxTakenRecords {
			recs = append(recs, rec)
			n += k
		}
	}
	return recs, n
}

// promptsIn is how many of texts, from the first, the main-chain prompt
// rec holds in order (0: rec is no prompt of these).
func promptsIn(rec *claude.Record, texts []string) int {
	if rec.IsSidechain || rec.ParentToolUseID != "" || rec.IsMeta || rec.IsCompactSummary || rec.OriginKind != "" || rec.Message == nil {
		return 0
	}
	c := rec.Message.Content
	if c.IsString {
		if len(texts) > 0 && samePrompt(c.String, texts[0]) {
			return 1
		}
		return 0
	}
	k := 0
	for _, b := range c.Blocks {
		if b.Type != "text" || b.Text == nil || k >= len(texts) || !samePrompt(*b.Text, texts[k]) {
			return 0
		}
		k++
	}
	return k
}

// samePrompt reports whether Claude's record of a prompt is the text
// written (Claude ends each of several prompts taken together with a
// newline). A slash command is recorded as its markup
// (<command-name>/x</command-name>…<command-args>…</command-args>),
// under the name Claude gives it: 2.1.330 records /cost as /usage, so
// only the arguments must agree (the records read are past the last
// echo, in the order written: a command recorded there is one written).
func samePrompt(recorded, written string) bool {
	if strings.TrimSpace(recorded) == strings.TrimSpace(written) {
		return true
	}
	if !isSlashCommand(written) {
		return false
	}
	_, args, ok := recordedCommand(recorded)
	if !ok {
		return false
	}
	_, wargs := splitCommand(written)
	return args == wargs
}

// PromptTaken looks in the session's transcript at path, past offset at,
// for the prompt text as Claude records a prompt it took (a main-chain
// user message with it as a text block, alone or with others taken
// together), skipping the records claimed already (those of other
// prompts); it returns the record's uuid, "" when Claude has no such
// record. It tells a restarted ccrelay whether a prompt the one before
// began reached Claude (the ledger's StartedAt).
func PromptTaken(path string, at int64, text string, claimed func(uuid string) bool) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return ""
	}
	lr := lines.NewReader(f, 64<<10, maxStreamLine)
	for {
		l, err := lr.Next()
		if err != nil || !l.Complete {
			return ""
		}
		if l.TooLong || len(l.Data) == 0 || !bytes.Contains(l.Data, []byte(`"user"`)) {
			continue
		}
		rec, err := claude.Parse(bytes.Clone(l.Data))
		if err != nil || rec.Type != claude.TypeUser || rec.UUID == "" || (claimed != nil && claimed(rec.UUID)) {
			continue
		}
		if holdsPrompt(rec, text) {
			return rec.UUID
		}
	}
}

// holdsPrompt reports whether rec is a main-chain prompt (as promptsIn
// takes them) with text as one of its text blocks (the others are prompts
// taken with it).
func holdsPrompt(rec *claude.Record, text string) bool {
	if rec.Message == nil {
		return false
	}
	c := rec.Message.Content
	if c.IsString {
		return promptsIn(rec, []string{text}) == 1
	}
	var texts []string
	found := false
	for _, b := range c.Blocks {
		if b.Type != "text" || b.Text == nil {
			return false
		}
		texts = append(texts, *b.Text)
		found = found || samePrompt(*b.Text, text)
	}
	return found && promptsIn(rec, texts) == len(texts)
}
