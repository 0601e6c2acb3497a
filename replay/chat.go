package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ccrelay/ccrelay/protocol"
)

// ANSI styles used by the chat view.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiItalic = "\x1b[3m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiCyan   = "\x1b[36m"
)

// Chat renders envelopes as a readable transcript.
type Chat struct {
	w     io.Writer
	color bool
	turns int
	// per call: tool name and title, and its subagent (for indentation).
	calls     map[string]callInfo
	subTitles map[string]string
	// PreviewLines bounds how many lines of a tool result are shown.
	PreviewLines int
	open         bool // a turn is open
}

// Finish marks the end of the stream: a turn still open is shown as such.
func (c *Chat) Finish() error {
	if !c.open {
		return nil
	}
	_, err := io.WriteString(c.w, "   "+c.style("… turn still open", ansiDim)+"\n")
	return err
}

type callInfo struct{ name, title string }

// NewChat returns a renderer writing to w, with ANSI color if color is set.
func NewChat(w io.Writer, color bool) *Chat {
	return &Chat{w: w, color: color, calls: map[string]callInfo{}, subTitles: map[string]string{}, PreviewLines: 4}
}

func (c *Chat) style(s string, codes ...string) string {
	if !c.color || s == "" {
		return s
	}
	return strings.Join(codes, "") + s + ansiReset
}

func (c *Chat) indent(e *protocol.Envelope) string {
	if e.Subagent != "" {
		return c.style("│ ", ansiCyan)
	}
	return ""
}

// Write renders one envelope.
func (c *Chat) Write(e *protocol.Envelope) error {
	var b strings.Builder
	in := c.indent(e)
	switch e.Ev.T {
	case protocol.KindTurnStart:
		c.turns++
		c.open = true
		b.WriteString(c.style(fmt.Sprintf("── turn %d · %s ", c.turns, clock(e.Time)), ansiDim))
		b.WriteString(c.style(strings.Repeat("─", 40), ansiDim))
		b.WriteByte('\n')
	case protocol.KindTurnEnd:
		c.open = false
		st := string(e.Ev.Status)
		switch e.Ev.Status {
		case protocol.StatusCompleted:
			st = c.style("✓ completed", ansiGreen)
		case protocol.StatusFailed:
			st = c.style("✗ failed", ansiRed, ansiBold)
		case protocol.StatusCancelled:
			st = c.style("⊘ cancelled", ansiYellow)
		}
		b.WriteString("   " + st + "\n\n")
	case protocol.KindText:
		switch {
		case e.Role == protocol.RoleUser:
			b.WriteString(c.style("› ", ansiBold, ansiBlue))
			b.WriteString(c.style(indentLines(e.Ev.Text, "  "), ansiBold))
			b.WriteString("\n\n")
		case e.Ev.Thinking:
			b.WriteString(in + c.style("✻ "+indentLines(strings.TrimSpace(e.Ev.Text), in+"  "), ansiDim, ansiItalic))
			b.WriteByte('\n')
		default:
			b.WriteString(in + "⏺ " + indentLines(strings.TrimSpace(e.Ev.Text), in+"  "))
			b.WriteByte('\n')
		}
		if e.Usage != nil {
			u := e.Usage
			ctx := u.InputTokens
			if u.CacheReadInputTokens != nil {
				ctx += *u.CacheReadInputTokens
			}
			if u.CacheCreationInputTokens != nil {
				ctx += *u.CacheCreationInputTokens
			}
			b.WriteString(in + c.style(fmt.Sprintf("  · %d tokens in context, %d out", ctx, u.OutputTokens), ansiDim) + "\n")
		}
	case protocol.KindService:
		b.WriteString(in + c.style("⚑ "+e.Ev.Text, ansiYellow) + "\n")
	case protocol.KindToolCallStart:
		c.calls[e.Ev.Call] = callInfo{e.Ev.Name, e.Ev.Title}
		title := e.Ev.Title
		if title == e.Ev.Name+" call" {
			title = argSummary(e.Ev.Args)
		}
		b.WriteString(in + c.style("⚙ "+e.Ev.Name, ansiBold) + " " + oneLine(title, 100) + "\n")
	case protocol.KindToolCallEnd:
		ci := c.calls[e.Ev.Call]
		delete(c.calls, e.Ev.Call)
		mark := c.style("⎿ ", ansiDim)
		text := "done"
		if e.Ev.Result != nil {
			text = previewLines(*e.Ev.Result, c.PreviewLines, in+"  ")
			if e.Ev.Truncated {
				text += c.style(" …", ansiDim)
			}
		}
		if ci.name == "" {
			text = "(" + e.Ev.Call + ") " + text
		}
		if e.Ev.Error {
			b.WriteString(in + mark + c.style(text, ansiRed) + "\n")
		} else {
			b.WriteString(in + mark + c.style(text, ansiDim) + "\n")
		}
	case protocol.KindStart:
		title := e.Ev.Title
		if title == "" {
			title = "subagent"
		}
		c.subTitles[e.Subagent] = title
		b.WriteString(c.style("┌ ", ansiCyan) + c.style("Agent: "+title, ansiBold, ansiCyan) + "\n")
	case protocol.KindStop:
		b.WriteString(c.style("└ "+c.subTitles[e.Subagent]+" done", ansiCyan) + "\n")
	case protocol.KindFile:
		b.WriteString(in + "📎 " + e.Ev.Name + "\n")
	}
	_, err := io.WriteString(c.w, b.String())
	return err
}

func clock(ms int64) string {
	if ms <= 0 {
		return "--:--:--"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z")
}

func indentLines(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

func previewLines(s string, n int, prefix string) string {
	s = strings.TrimRight(s, "\n ")
	if s == "" {
		return "(no output)"
	}
	lines := strings.Split(s, "\n")
	more := 0
	if len(lines) > n {
		more = len(lines) - n
		lines = lines[:n]
	}
	for i, l := range lines {
		lines[i] = oneLine(l, 120)
	}
	out := strings.Join(lines, "\n"+prefix)
	if more > 0 {
		out += fmt.Sprintf("\n%s… %d more lines", prefix, more)
	}
	return out
}

// argSummary shows the most telling argument of a tool call.
func argSummary(args []byte) string {
	in := decodeArgs(args)
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "query", "prompt"} {
		if v, ok := in[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

// ColorSupported reports whether f is a terminal that shows ANSI color,
// honouring NO_COLOR and TERM=dumb.
func ColorSupported(f *os.File) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return IsTerminal(f)
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func decodeArgs(args []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	return m
}
