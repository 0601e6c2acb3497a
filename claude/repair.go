package claude

import "strings"

// NoResponseText is the text of the message Claude Code writes itself
// (model SyntheticModel) when it resumes a conversation that ends with a
// user message nobody answered: a turn cut when Claude ended (crashed, was
// killed or stopped), recorded as over.
const NoResponseText = "No response requested."

// IsNoResponse reports whether r is that message: Claude's bookkeeping on
// resume, not words of the model.
func IsNoResponse(r *Record) bool {
	if r.Type != TypeAssistant || r.IsAPIError || r.Message == nil || r.Message.Model != SyntheticModel {
		return false
	}
	c := &r.Message.Content
	if c.IsString {
		return strings.TrimSpace(c.String) == NoResponseText
	}
	n := 0
	for _, b := range c.Blocks {
		if b.Type != "text" || b.Text == nil || strings.TrimSpace(*b.Text) != NoResponseText {
			return false
		}
		n++
	}
	return n > 0
}

// sessionEndedPrefix starts the result Claude Code (2.1.330) records, when
// it resumes a conversation, for a tool call whose result the session that
// ran it never recorded (it ended during the call).
const sessionEndedPrefix = "[Tool call interrupted: the session ended before this call's result was recorded"

// IsSessionEndedResult reports whether text is that result.
func IsSessionEndedResult(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), sessionEndedPrefix)
}

// IsRepair reports whether r is what Claude Code records, and does not
// print, when it resumes a conversation it left unfinished: "No response
// requested.", or results of calls whose session ended (2.1.330).
func IsRepair(r *Record) bool {
	if IsNoResponse(r) {
		return true
	}
	if r.Type != TypeUser || r.IsSidechain || r.Message == nil || r.Message.Content.IsString || len(r.Message.Content.Blocks) == 0 {
		return false
	}
	for _, b := range r.Message.Content.Blocks {
		if b.Type != "tool_result" || !IsSessionEndedResult(ToolResultText(b.Content)) {
			return false
		}
	}
	return true
}
