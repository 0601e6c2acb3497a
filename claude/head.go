package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ccrelay/ccrelay/internal/lines"
)

// Head is what the first lines of a session's transcript say: where it ran
// and what it was asked first.
type Head struct {
	Cwd    string
	Prompt string // the first prompt a person typed ("" when none yet)
}

// Bounds of ReadHead: it reads at most HeadBytes of a transcript, in lines
// of at most HeadLineBytes (longer lines are skipped).
const (
	HeadBytes     = 256 << 10
	HeadLineBytes = 64 << 10
)

// ReadHead reads the start of the transcript at path, never more than
// HeadBytes: the session's folder and its first prompt.
func ReadHead(path string) (Head, error) {
	f, err := os.Open(path)
	if err != nil {
		return Head{}, fmt.Errorf("read head of %s: %w", path, err)
	}
	defer f.Close()
	var h Head
	lr := lines.NewReader(io.LimitReader(f, HeadBytes), 16<<10, HeadLineBytes)
	for h.Cwd == "" || h.Prompt == "" {
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
		if h.Cwd == "" {
			var c struct {
				Cwd string `json:"cwd"`
			}
			if json.Unmarshal(l.Data, &c) == nil {
				h.Cwd = c.Cwd
			}
		}
		if h.Prompt == "" {
			h.Prompt = typedPrompt(l.Data)
		}
	}
	return h, nil
}

// typedPrompt is the text of a prompt a person typed, or "": not meta,
// not a tool result, not a command's output or a caveat Claude Code adds.
func typedPrompt(line []byte) string {
	r, err := Parse(line)
	if err != nil || r == nil || r.Type != "user" || r.IsMeta || r.IsSidechain || r.IsCompactSummary || r.Message == nil {
		return ""
	}
	text := ""
	if c := r.Message.Content; c.IsString {
		text = c.String
	} else {
		for _, b := range c.Blocks {
			if b.Type == "tool_result" {
				return ""
			}
			if b.Type == "text" && b.Text != nil && text == "" {
				text = *b.Text
			}
		}
	}
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "<") || IsInterruptText(text) {
		return "" // <command-name>, <local-command-stdout>, caveats
	}
	return text
}

// Markup returns what the first <tag>…</tag> in text holds, trimmed (Claude
// marks up commands and notifications in a record's text so:
// <command-name>/cost</command-name>), or "" when text has none.
func Markup(text, tag string) string {
	_, rest, ok := strings.Cut(text, "<"+tag+">")
	if !ok {
		return ""
	}
	v, _, ok := strings.Cut(rest, "</"+tag+">")
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}
