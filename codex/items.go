package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// TurnItem is the typed item of an item_completed event: what the app-server
// protocol calls a thread item. Type says which fields are set.
type TurnItem struct {
	Type string `json:"type"`
	// ID is the item's id: the call id of a CommandExecution or FileChange,
	// the response item id of an AgentMessage or Reasoning ("msg_…",
	// "rs_…"), a UUID of its own for a UserMessage.
	ID string `json:"id"`

	// UserMessage, AgentMessage
	Content []TurnContent `json:"content"`

	// Reasoning: the readable summaries (the reasoning itself is
	// encrypted and never in the rollout).
	SummaryText []string `json:"summary_text"`

	// CommandExecution
	Command          []string `json:"command"`
	Cwd              string   `json:"cwd"`
	Status           string   `json:"status"` // completed, failed, declined, in_progress
	AggregatedOutput *string  `json:"aggregated_output"`
	ExitCode         *int64   `json:"exit_code"`

	// FileChange, in the order Codex wrote them.
	Changes FileChanges `json:"changes"`
	Stdout  string      `json:"stdout"`
	Stderr  string      `json:"stderr"`
}

// TurnContent is one part of a user or agent message: "text" ("Text" for an
// agent message) with Text, or an image the text-only mapping leaves out.
type TurnContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Text joins the text parts of a message.
func (it *TurnItem) Text() string {
	var sb strings.Builder
	for _, c := range it.Content {
		if strings.EqualFold(c.Type, "text") {
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(c.Text)
		}
	}
	return sb.String()
}

// FileChange is the change a patch made to one file: Kind "add" (Content is
// the new file), "delete" (Content is the file that was removed) or
// "update" (UnifiedDiff is a unified diff with line numbers; MovePath is
// set when the file was also moved).
type FileChange struct {
	Path        string
	Kind        string  `json:"type"`
	Content     string  `json:"content"`
	UnifiedDiff string  `json:"unified_diff"`
	MovePath    *string `json:"move_path"`
}

// FileChanges are a FileChange item's changes, kept in the order of the
// JSON object Codex wrote (a path -> change map).
type FileChanges []FileChange

// maxChanges bounds the changes of one item that are decoded.
const maxChanges = 4096

// UnmarshalJSON decodes the path -> change object in order.
func (fc *FileChanges) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if bytes.Equal(t, []byte("null")) {
		*fc = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("file changes are not an object")
	}
	var out FileChanges
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		path, _ := tok.(string)
		var c FileChange
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("file change of %q: %w", path, err)
		}
		if len(out) < maxChanges {
			c.Path = path
			out = append(out, c)
		}
	}
	*fc = out
	return nil
}

// ResponseItem is a response_item payload: an item of the model-visible
// history, in the Responses API's shape.
type ResponseItem struct {
	Type string `json:"type"`
	ID   string `json:"id"`

	// message: role "user", "assistant", "developer" or "system".
	Role    string        `json:"role"`
	Content []ContentItem `json:"content"`

	// reasoning: summaries only; EncryptedContent is never readable.
	Summary []ContentItem `json:"summary"`

	// function_call, custom_tool_call
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Arguments string `json:"arguments"` // function_call: a JSON text
	Input     string `json:"input"`     // custom_tool_call: free text
	CallID    string `json:"call_id"`
	Status    string `json:"status"`

	// function_call_output, custom_tool_call_output: a string, or
	// (other versions) an object or a list of content items.
	Output json.RawMessage `json:"output"`
}

// ContentItem is a part of a message or a reasoning summary.
type ContentItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Text joins the text parts of a message (input_text, output_text) or a
// reasoning summary (summary_text).
func (it *ResponseItem) Text() string {
	parts := it.Content
	if it.Type == ItemReasoning {
		parts = it.Summary
	}
	var sb strings.Builder
	for _, c := range parts {
		switch c.Type {
		case "input_text", "output_text", "summary_text", "text":
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(c.Text)
		}
	}
	return sb.String()
}

// OutputText is a tool output as text: the string as written, the content
// of an object's "content" field, or the text parts of a list of content
// items joined by newlines ("" when there is none).
func (it *ResponseItem) OutputText() string {
	t := bytes.TrimSpace(it.Output)
	if len(t) == 0 {
		return ""
	}
	switch t[0] {
	case '"':
		var s string
		_ = json.Unmarshal(t, &s)
		return s
	case '{':
		var o struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(t, &o) != nil {
			return ""
		}
		if c := bytes.TrimSpace(o.Content); len(c) == 0 || c[0] == '{' {
			return "" // one level only: no recursion on hostile nesting
		}
		inner := ResponseItem{Output: o.Content}
		return inner.OutputText()
	case '[':
		var items []ContentItem
		if json.Unmarshal(t, &items) != nil {
			return ""
		}
		var sb strings.Builder
		for _, c := range items {
			if c.Text == "" {
				continue
			}
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(c.Text)
		}
		return sb.String()
	}
	return ""
}
