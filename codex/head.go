package codex

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ccrelay/ccrelay/internal/lines"
)

// Head is what the first lines of a rollout say: its thread, where it runs,
// the thread that spawned it (a subagent's) and the first prompt typed.
type Head struct {
	ThreadID string
	Cwd      string
	Parent   string
	Prompt   string // "" when nothing was asked yet
}

// Bounds of ReadHead: it reads at most HeadBytes of a rollout, in lines of
// at most HeadLineBytes (its first line embeds Codex's base instructions,
// tens of KB; longer lines are skipped).
const (
	HeadBytes     = 1 << 20
	HeadLineBytes = 512 << 10
)

// ReadHead reads the start of the rollout at path, never more than
// HeadBytes: its session_meta and its first user message.
func ReadHead(path string) (Head, error) {
	f, err := os.Open(path)
	if err != nil {
		return Head{}, fmt.Errorf("read head of %s: %w", path, err)
	}
	defer f.Close()
	var h Head
	lr := lines.NewReader(io.LimitReader(f, HeadBytes), 32<<10, HeadLineBytes)
	for h.Prompt == "" {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return h, fmt.Errorf("read head of %s: %w", path, err)
		}
		if l.TooLong || !l.Complete {
			continue
		}
		r, err := Parse(l.Data)
		if err != nil || r == nil {
			continue
		}
		switch {
		case r.SessionMeta != nil && h.ThreadID == "":
			h.ThreadID, h.Cwd, h.Parent = r.SessionMeta.ID, r.SessionMeta.Cwd, r.SessionMeta.ParentThreadID
		case r.Event != nil && r.Event.Type == EventItemCompleted && r.Event.Item != nil && r.Event.Item.Type == TurnItemUserMessage:
			h.Prompt = strings.TrimSpace(r.Event.Item.Text())
		}
	}
	return h, nil
}
