package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/lines"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// A Codex command the app sent is recorded in the ledger when it is begun,
// a prompt or a permission answer with the size of the thread's rollout
// then (Ledger.BeginPrompt). When ccrelay is killed before its outcome,
// Codex dies with it (app-server is its child), and the relay delivers the
// command again to the next ccrelay: the rollout past that size tells what
// Codex did with it, as a Claude session's transcript does (PromptTaken).
// A prompt Codex wrote as the user's message was taken, and is done (it is
// never run again); an answer whose call has its output there reached
// Codex, and is done; otherwise the command is rejected with what became
// of it.

// Outcomes of a Codex command begun by a ccrelay that was killed before it
// ended, and that left no trace in the rollout.
var (
	ErrCodexPromptLost = errors.New("ccrelay stopped, and Codex with it, before Codex took this prompt: it was not run; send it again")
	ErrCodexAnswerLost = errors.New("ccrelay stopped, and Codex with it, before this answer reached Codex: the request no longer waits, its turn ended with Codex")
)

// codexLedgered reports whether c's kind is begun with the rollout's size.
func codexLedgered(c Command) bool {
	return c.Kind == protocol.CommandPrompt || c.Kind == protocol.CommandPermission
}

// codexInterrupted is the outcome of c, begun by a ccrelay that stopped
// before it ended (the ledger's ErrInterrupted), from the thread's
// rollout at path past where it stood when c was begun.
func codexInterrupted(l *Ledger, c Command, path string) error {
	at, ok := l.StartedAt(c.ID)
	if !ok || path == "" {
		return ErrInterrupted
	}
	switch c.Kind {
	case protocol.CommandPrompt:
		if codexRolloutHas(path, at, func(r *codex.Record) bool {
			it := r.Item
			return it != nil && it.Type == "message" && it.Role == "user" && strings.TrimSpace(it.Text()) == strings.TrimSpace(c.Text)
		}) {
			return nil
		}
		return ErrCodexPromptLost
	case protocol.CommandPermission:
		call, _, _ := strings.Cut(c.RequestID, "#")
		if call != "" && codexRolloutHas(path, at, func(r *codex.Record) bool {
			it := r.Item
			return it != nil && (it.Type == "function_call_output" || it.Type == "custom_tool_call_output") && it.CallID == call
		}) {
			return nil
		}
		return ErrCodexAnswerLost
	}
	return ErrInterrupted
}

// codexRolloutHas reports whether a whole line of the rollout at path,
// past offset at, is a record match accepts.
func codexRolloutHas(path string, at int64, match func(*codex.Record) bool) bool {
	f, err := scanner.OpenRegular(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(at, io.SeekStart); err != nil {
		return false
	}
	lr := lines.NewReader(f, 64<<10, codex.MaxLineBytes)
	for {
		l, err := lr.Next()
		if err != nil || !l.Complete {
			return false
		}
		if l.TooLong || !bytes.Contains(l.Data, []byte(`"response_item"`)) {
			continue
		}
		if r, err := codex.Parse(l.Data); err == nil && match(r) {
			return true
		}
	}
}

// rolloutSize is the size of the rollout at path (0: none yet).
func rolloutSize(path string) int64 {
	if path == "" {
		return 0
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// errString is err's text, "done" for nil.
func errString(err error) string {
	if err == nil {
		return "done"
	}
	return err.Error()
}

// A new Codex thread has no rollout until its first turn: app-server
// writes nothing of it before. A ccrelay killed between announcing such a
// thread and Codex writing it (the app's first prompt taken, or not yet)
// leaves a session in the app that Codex cannot resume (thread/resume:
// "no rollout found"), with its prompt delivered and never answered. The
// next ccrelay asked for that thread starts a new one, and answers what
// the app sent the old one with CodexThreadGone: nothing of it was run.

// CodexThreadGone is the answer to a command for thread, a thread this
// state's ccrelay ran that Codex has no rollout of, now that it goes on
// as the new thread next.
func CodexThreadGone(thread, next string) error {
	return fmt.Errorf("Codex has no thread %s: ccrelay stopped, and Codex with it, before Codex wrote the thread's first prompt (or the thread was removed since), so it cannot go on and this was not run. It goes on as a new Codex session, %s: send it there", thread, next)
}

// AnswerGoneThread answers c, a command for a thread Codex has no rollout
// of, with why (CodexThreadGone), and records that in the ledger: a
// command whose outcome was recorded before (it reached its end before
// ccrelay stopped) gets that outcome again; one begun and never ended, or
// new, is rejected with why, and a repeat later gets the same.
func AnswerGoneThread(l *Ledger, c Command, why error) {
	if l == nil || c.ID == "" {
		c.Reply(why)
		return
	}
	fresh, outcome, err := l.Begin(c.ID)
	switch {
	case err != nil:
		c.Reply(why)
	case !fresh && errors.Is(outcome, ErrInProgress):
		// This process carries it out: its own answer follows.
	case !fresh && !errors.Is(outcome, ErrInterrupted):
		c.Reply(outcome)
	default:
		if lerr := l.Finish(c.ID, why); lerr != nil {
			c.Reply(fmt.Errorf("%w (ccrelay could not record this answer: %v)", why, lerr))
			return
		}
		c.Reply(why)
	}
}
