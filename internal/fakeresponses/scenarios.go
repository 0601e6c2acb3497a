package fakeresponses

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// Scenario is a scripted behaviour, chosen by its keyword standing as a
// word of its own (in capitals) in the last user message: "SHELL: list the
// files" runs the shell scenario. A prompt without a keyword gets Text.
type Scenario string

const (
	// Text answers with a reasoning summary and a short text.
	Text Scenario = "TEXT"
	// Shell runs ShellCommand with exec_command, then says what it printed.
	Shell Scenario = "SHELL"
	// Patch adds PatchFile with apply_patch, then answers with text.
	Patch Scenario = "PATCH"
	// PatchEdit updates EditFile (which must hold EditBefore) with an @@
	// hunk of apply_patch, then answers with text.
	PatchEdit Scenario = "PATCHEDIT"
	// Escalate runs EscalateCommand with sandbox_permissions
	// "require_escalated" and a justification: an approval under
	// app-server's on-request policy.
	Escalate Scenario = "ESCALATE"
	// SlowShell runs SlowCommand, which outlives its yield_time_ms: the
	// call ends with the process still running.
	SlowShell Scenario = "SLOWSHELL"
	// SlowText streams its text in many deltas and pauses after
	// SlowTextBeforePause of them until Server.Release, the request's end
	// (an interrupt) or the pause timeout (Server.SetPauseTimeout).
	SlowText Scenario = "SLOWTEXT"
	// Subagent spawns a subagent (multi_agent_v1's spawn_agent) with
	// SubagentTask, waits for it (wait_agent), then answers with text. The
	// subagent's own requests carry no keyword and get Text.
	Subagent Scenario = "SUBAGENT"
	// AskUser calls request_user_input with one question, then answers
	// with text.
	AskUser Scenario = "ASKUSER"
)

// Scenarios lists every scenario, Text first.
var Scenarios = []Scenario{Text, Shell, Patch, PatchEdit, Escalate, SlowShell, SlowText, Subagent, AskUser}

// What the scenarios script.
const (
	TextReply    = "Hello from the fake Responses API."
	TextSummary  = "**Answering the greeting**\n\nThe user said hello; answer briefly."
	ShellCommand = "echo hello-from-shell; ls"
	ShellReply   = "The command printed hello-from-shell and the listing."
	PatchFile    = "hello.txt"
	PatchContent = "hello from the patch\nsecond line\n"
	PatchReply   = "I added hello.txt."
	EditFile     = "notes.txt"
	EditBefore   = "first line\nsecond line\nthird line\n"
	EditAfter    = "first line\nsecond line, edited\nthird line\n"
	EditReply    = "I edited notes.txt."
	// EscalateCommand writes into the workspace, which a read-only sandbox
	// refuses: it needs the escalation it asks for.
	EscalateCommand       = "echo escalated > escalated.txt; cat escalated.txt"
	EscalateJustification = "Do you allow writing escalated.txt in the workspace?"
	EscalateReply         = "The escalated command is done."
	// SlowCommand runs longer than SlowYieldMS: exec_command yields with
	// the process still running.
	SlowCommand   = "echo slow-start; sleep 30; echo slow-end"
	SlowYieldMS   = 1000
	SlowReply     = "The slow command is still running."
	SubagentTask  = "Say hello from the subagent."
	SubagentReply = "The subagent has answered."
	AskQuestion   = "Which colour should the button be?"
	AskReply      = "Thanks for the answer."
	// SlowTextBeforePause is how many deltas of SlowTextReply stream
	// before the pause.
	SlowTextBeforePause = 5
)

// SlowTextReply is SLOWTEXT's text: 40 words, one delta each.
var SlowTextReply = strings.TrimSpace(strings.Repeat("slowly ", 39) + "done.")

// PatchAdd and PatchUpdate are the apply_patch inputs of PATCH and
// PATCHEDIT.
var (
	PatchAdd    = "*** Begin Patch\n*** Add File: " + PatchFile + "\n" + plusLines(PatchContent) + "*** End Patch\n"
	PatchUpdate = "*** Begin Patch\n*** Update File: " + EditFile + "\n@@\n first line\n-second line\n+second line, edited\n third line\n*** End Patch\n"
)

func plusLines(s string) string {
	var sb strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			sb.WriteString("+" + l)
		}
	}
	return sb.String()
}

// Choose picks the scenario whose keyword stands as a word in text.
func Choose(text string) Scenario {
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' })
	for _, w := range words {
		for _, sc := range Scenarios[1:] {
			if w == string(sc) {
				return sc
			}
		}
	}
	return Text
}

// item is one output item of a scripted reply.
type item struct {
	kind      string // "reasoning", "message", "function_call", "custom_tool_call"
	text      string // reasoning summary, message text, custom tool input
	name      string // tool name
	namespace string // a namespaced function's namespace
	args      any    // function arguments, marshalled to JSON
	slow      bool   // message: a delta a word, paused after SlowTextBeforePause
}

// reply is a scripted model response.
type reply struct {
	items []item
	usage Usage
}

// Usage is the token usage a response reports in response.completed.
type Usage struct {
	Input, Cached, Output, Reasoning int
}

// usageFor is a deterministic usage: it grows with the step of the turn.
func usageFor(step int) Usage {
	return Usage{Input: 1200 + 100*step, Cached: 1000 * min(step, 1), Output: 40 + 5*step, Reasoning: 8}
}

func reasoning(s string) item { return item{kind: "reasoning", text: s} }
func message(s string) item   { return item{kind: "message", text: s} }
func call(name string, args any) item {
	return item{kind: "function_call", name: name, args: args}
}

// script is the reply to a request of turn t.
func script(t turn) reply {
	r := reply{usage: usageFor(t.step)}
	final := func(text string) reply {
		r.items = []item{message(text)}
		return r
	}
	switch t.scenario {
	case Shell:
		if t.step == 0 {
			r.items = []item{reasoning("**Listing the files**\n\nRun a shell command."), call("exec_command", map[string]any{"cmd": ShellCommand, "yield_time_ms": 10000})}
			return r
		}
		return final(ShellReply)
	case Patch, PatchEdit:
		if t.step == 0 {
			in := PatchAdd
			if t.scenario == PatchEdit {
				in = PatchUpdate
			}
			r.items = []item{reasoning("**Editing a file**\n\nUse apply_patch."), {kind: "custom_tool_call", name: "apply_patch", text: in}}
			return r
		}
		if t.scenario == PatchEdit {
			return final(EditReply)
		}
		return final(PatchReply)
	case Escalate:
		if t.step == 0 {
			r.items = []item{call("exec_command", map[string]any{"cmd": EscalateCommand, "sandbox_permissions": "require_escalated",
				"justification": EscalateJustification, "yield_time_ms": 10000})}
			return r
		}
		return final(EscalateReply)
	case SlowShell:
		if t.step == 0 {
			r.items = []item{call("exec_command", map[string]any{"cmd": SlowCommand, "yield_time_ms": SlowYieldMS})}
			return r
		}
		return final(SlowReply)
	case SlowText:
		r.items = []item{reasoning("**Writing slowly**"), {kind: "message", text: SlowTextReply, slow: true}}
		return r
	case Subagent:
		switch t.step {
		case 0:
			r.items = []item{{kind: "function_call", namespace: "multi_agent_v1", name: "spawn_agent", args: map[string]any{"message": SubagentTask}}}
			return r
		case 1:
			id := agentID(t.outputs)
			r.items = []item{{kind: "function_call", namespace: "multi_agent_v1", name: "wait_agent", args: map[string]any{"targets": []string{id}, "timeout_ms": 60000}}}
			return r
		}
		return final(SubagentReply)
	case AskUser:
		if t.step == 0 {
			r.items = []item{call("request_user_input", map[string]any{"questions": []any{map[string]any{
				"id": "button_colour", "header": "Colour", "question": AskQuestion,
				"options": []any{
					map[string]any{"label": "Blue (Recommended)", "description": "Matches the rest of the page."},
					map[string]any{"label": "Red", "description": "Stands out."},
				}}}})}
			return r
		}
		return final(AskReply)
	}
	r.items = []item{reasoning(TextSummary), message(TextReply)}
	return r
}

// agentID finds the id spawn_agent returned (its output is JSON with an
// agent_id or id field), or "" if there is none.
func agentID(outs []Output) string {
	for i := len(outs) - 1; i >= 0; i-- {
		var o map[string]any
		if json.Unmarshal([]byte(outs[i].Output), &o) != nil {
			continue
		}
		for _, k := range []string{"agent_id", "id", "thread_id"} {
			if v, ok := o[k]; ok {
				return fmt.Sprint(v)
			}
		}
	}
	return ""
}
