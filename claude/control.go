package claude

import (
	"encoding/json"
	"fmt"
	"strings"
)

// System message subtypes of stream-json that ccrelay acts on.
const (
	SystemInit             = "init"
	SystemStatus           = "status"
	SystemTaskStarted      = "task_started"
	SystemTaskNotification = "task_notification"
	SystemTaskUpdated      = "task_updated"
	SystemTaskProgress     = "task_progress"
)

// Control request subtypes.
const (
	ControlCanUseTool        = "can_use_tool"
	ControlInterrupt         = "interrupt"
	ControlStopTask          = "stop_task" // {"task_id"}: stops one background task
	ControlGetContextUsage   = "get_context_usage"
	ControlSetModel          = "set_model"
	ControlSetPermissionMode = "set_permission_mode"
)

// System is the payload of a stream-json system message (the fields of the
// subtypes ccrelay uses; the rest stays in StreamMessage.Raw).
type System struct {
	// init
	Model          string `json:"model"`
	PermissionMode string `json:"permissionMode"`
	Cwd            string `json:"cwd"`
	Version        string `json:"claude_code_version"`
	// status
	Status *string `json:"status"`
	// task_started, task_notification
	TaskID         string `json:"task_id"`
	ToolUseID      string `json:"tool_use_id"`
	Description    string `json:"description"`
	Prompt         string `json:"prompt"`
	IsBackgrounded bool   `json:"is_backgrounded"`
	// TaskType is what runs: "local_agent" (a subagent), "local_bash"
	// (a Bash call, the main agent's or a subagent's: owned_by_subagent),
	// others; "" when Claude does not say.
	TaskType   string `json:"task_type"`
	TaskStatus string `json:"-"`
	Summary    string `json:"summary"`
	// task_updated: the fields of the task that changed.
	Patch struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"patch"`
	// task_progress: what the task does now.
	LastToolName string          `json:"last_tool_name"`
	TaskUsage    json.RawMessage `json:"usage"`
}

// TaskTerminal reports whether a task status (task_updated's patch,
// task_notification) says the task is over.
func TaskTerminal(status string) bool {
	switch status {
	case "completed", "failed", "killed", "stopped", "cancelled", "error":
		return true
	}
	return false
}

func parseSystem(line []byte) (*System, error) {
	var s struct {
		System
		RawStatus json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(line, &s); err != nil {
		return nil, fmt.Errorf("decode system message: %w", err)
	}
	out := s.System
	// status is a string or null in status messages and a task's state in
	// task_notification.
	var str *string
	if json.Unmarshal(s.RawStatus, &str) == nil {
		out.Status = str
		if str != nil {
			out.TaskStatus = *str
		}
	}
	return &out, nil
}

// PromptLine is a user prompt written to Claude's stdin in stream-json
// input mode.
func PromptLine(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type":               "user",
		"session_id":         "",
		"parent_tool_use_id": nil,
		"message": map[string]any{
			"role":    "user",
			"content": []map[string]string{{"type": "text", "text": text}},
		},
	})
	return append(b, '\n')
}

// ControlRequestLine is a control request to Claude: interrupt,
// set_model (field "model"), set_permission_mode (field "mode").
func ControlRequestLine(requestID, subtype string, fields map[string]string) []byte {
	req := map[string]any{"subtype": subtype}
	for k, v := range fields {
		req[k] = v
	}
	b, _ := json.Marshal(map[string]any{"type": StreamControlRequest, "request_id": requestID, "request": req})
	return append(b, '\n')
}

// PermissionRule is one rule of a permission update (as in Claude's
// permission_suggestions).
type PermissionRule struct {
	ToolName    string `json:"toolName"`
	RuleContent string `json:"ruleContent,omitempty"`
}

// AllowLine answers a can_use_tool request with allow. input is the tool
// input to run with (the request's, or an edited one). If forSession, the
// tool is allowed for the rest of the session: rules are added with
// destination "session".
func AllowLine(requestID string, input json.RawMessage, sessionRules []PermissionRule) []byte {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	resp := map[string]any{"behavior": "allow", "updatedInput": input}
	if len(sessionRules) > 0 {
		resp["updatedPermissions"] = []map[string]any{{
			"type": "addRules", "rules": sessionRules, "behavior": "allow", "destination": "session",
		}}
	}
	return controlResponse(requestID, resp)
}

// DenyLine answers a can_use_tool request with deny and a message the
// model sees. With interrupt, Claude also stops the turn.
func DenyLine(requestID, message string, interrupt bool) []byte {
	if message == "" {
		message = "The user denied this tool use."
	}
	resp := map[string]any{"behavior": "deny", "message": message}
	if interrupt {
		resp["interrupt"] = true
	}
	return controlResponse(requestID, resp)
}

func controlResponse(requestID string, resp any) []byte {
	b, _ := json.Marshal(map[string]any{"type": StreamControlResponse, "response": map[string]any{
		"subtype": "success", "request_id": requestID, "response": resp,
	}})
	return append(b, '\n')
}

// Texts Claude Code writes as a user message when the user interrupts a
// turn.
const (
	InterruptedText        = "[Request interrupted by user]"
	InterruptedForToolText = "[Request interrupted by user for tool use]"
)

// IsInterruptText reports whether s is Claude's interrupt marker.
func IsInterruptText(s string) bool {
	s = strings.TrimSpace(s)
	return s == InterruptedText || s == InterruptedForToolText
}

// Task types of task_started (task_type) that ccrelay tells apart.
const (
	TaskTypeAgent = "local_agent"
	TaskTypeBash  = "local_bash"
)

// SubagentTask reports whether a task_started is of a subagent (an Agent
// call), not of a Bash call or another task: one Claude says is an agent,
// or says nothing of.
func (s *System) SubagentTask() bool {
	return s.TaskType == "" || s.TaskType == TaskTypeAgent
}
