package codex

import (
	"encoding/json"
	"unicode/utf8"
)

// The app-server methods ccrelay uses, as `codex app-server
// generate-json-schema` of TestedVersion names them.
const (
	// Client requests.
	MethodInitialize    = "initialize"
	MethodThreadStart   = "thread/start"
	MethodThreadResume  = "thread/resume"
	MethodTurnStart     = "turn/start"
	MethodTurnSteer     = "turn/steer"
	MethodTurnInterrupt = "turn/interrupt"
	// Client notification.
	MethodInitialized = "initialized"

	// Server notifications.
	NotifyThreadStarted     = "thread/started"
	NotifyThreadStatus      = "thread/status/changed"
	NotifyTurnStarted       = "turn/started"
	NotifyTurnCompleted     = "turn/completed"
	NotifyTurnDiff          = "turn/diff/updated"
	NotifyItemStarted       = "item/started"
	NotifyItemCompleted     = "item/completed"
	NotifyAgentMessageDelta = "item/agentMessage/delta"
	NotifyRequestResolved   = "serverRequest/resolved"
	NotifyTokenUsage        = "thread/tokenUsage/updated"
	NotifyError             = "error"
	NotifyWarning           = "warning"
	NotifyConfigWarning     = "configWarning"

	// Server requests.
	RequestCommandApproval    = "item/commandExecution/requestApproval"
	RequestFileChangeApproval = "item/fileChange/requestApproval"
	RequestPermissions        = "item/permissions/requestApproval"
	RequestUserInput          = "item/tool/requestUserInput"
	RequestElicitation        = "mcpServer/elicitation/request"
	RequestDynamicTool        = "item/tool/call"
	RequestAuthRefresh        = "account/chatgptAuthTokens/refresh"
	RequestAttestation        = "attestation/generate"
	RequestLegacyPatch        = "applyPatchApproval"
	RequestLegacyExec         = "execCommandApproval"
)

// ClientInfo names the client to app-server (initialize); Name becomes
// the thread's originator.
type ClientInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeParams is initialize's request.
type InitializeParams struct {
	ClientInfo   ClientInfo              `json:"clientInfo"`
	Capabilities *InitializeCapabilities `json:"capabilities,omitempty"`
}

// InitializeCapabilities are what the client can do.
type InitializeCapabilities struct {
	ExperimentalAPI bool `json:"experimentalApi,omitempty"`
}

// InitializeResponse is initialize's answer.
type InitializeResponse struct {
	UserAgent      string `json:"userAgent"`
	CodexHome      string `json:"codexHome"`
	PlatformFamily string `json:"platformFamily"`
	PlatformOS     string `json:"platformOs"`
}

// Approval policies and sandbox modes (thread/start).
const (
	ApprovalOnRequest = "on-request"
	ApprovalUntrusted = "untrusted"
	ApprovalNever     = "never"

	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
	SandboxFullAccess     = "danger-full-access"
)

// ThreadStartParams is thread/start's request.
type ThreadStartParams struct {
	Cwd            string `json:"cwd,omitempty"`
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	Sandbox        string `json:"sandbox,omitempty"`
	Model          string `json:"model,omitempty"`
}

// ThreadResumeParams is thread/resume's request.
type ThreadResumeParams struct {
	ThreadID       string `json:"threadId"`
	Cwd            string `json:"cwd,omitempty"`
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	Sandbox        string `json:"sandbox,omitempty"`
	Model          string `json:"model,omitempty"`
	// ExcludeTurns: the answer carries the thread without its turns.
	ExcludeTurns bool `json:"excludeTurns,omitempty"`
}

// Thread is a thread as app-server describes it.
type Thread struct {
	ID string `json:"id"`
	// Path is the thread's rollout file ([UNSTABLE] in the schema; set
	// by 0.169.0). It exists once the first turn started.
	Path          string  `json:"path,omitempty"`
	Cwd           string  `json:"cwd,omitempty"`
	Model         *string `json:"model,omitempty"`
	CLIVersion    string  `json:"cliVersion,omitempty"`
	ParentThread  *string `json:"parentThreadId,omitempty"`
	ModelProvider string  `json:"modelProvider,omitempty"`
}

// ThreadStartResponse is the answer to thread/start and thread/resume.
type ThreadStartResponse struct {
	Thread         Thread          `json:"thread"`
	Model          string          `json:"model"`
	ApprovalPolicy json.RawMessage `json:"approvalPolicy,omitempty"`
	Sandbox        json.RawMessage `json:"sandbox,omitempty"`
}

// UserInput is one part of a prompt (turn/start, turn/steer).
type UserInput struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// TextInput is a prompt of text.
func TextInput(text string) []UserInput { return []UserInput{{Type: "text", Text: text}} }

// TurnStartParams is turn/start's request.
type TurnStartParams struct {
	ThreadID string      `json:"threadId"`
	Input    []UserInput `json:"input"`
	Model    string      `json:"model,omitempty"`
}

// TurnSteerParams is turn/steer's request: input added to the running
// turn ExpectedTurnID.
type TurnSteerParams struct {
	ThreadID       string      `json:"threadId"`
	ExpectedTurnID string      `json:"expectedTurnId"`
	Input          []UserInput `json:"input"`
}

// TurnSteerResponse is turn/steer's answer.
type TurnSteerResponse struct {
	TurnID string `json:"turnId"`
}

// TurnInterruptParams is turn/interrupt's request.
type TurnInterruptParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

// Turn statuses.
const (
	TurnCompleted   = "completed"
	TurnInterrupted = "interrupted"
	TurnFailed      = "failed"
	TurnInProgress  = "inProgress"
)

// Turn is a turn as app-server describes it.
type Turn struct {
	ID     string        `json:"id"`
	Status string        `json:"status"`
	Error  *AppTurnError `json:"error,omitempty"`
}

// AppTurnError says why a turn failed.
type AppTurnError struct {
	Message           string `json:"message"`
	AdditionalDetails string `json:"additionalDetails,omitempty"`
}

// TurnStartResponse is turn/start's answer.
type TurnStartResponse struct {
	Turn Turn `json:"turn"`
}

// TurnNotification is turn/started's and turn/completed's params.
type TurnNotification struct {
	ThreadID string `json:"threadId"`
	Turn     Turn   `json:"turn"`
}

// ItemNotification is item/started's and item/completed's params.
type ItemNotification struct {
	ThreadID string     `json:"threadId"`
	TurnID   string     `json:"turnId"`
	Item     ThreadItem `json:"item"`
}

// ThreadItem is an item of a turn; only the fields ccrelay reads.
type ThreadItem struct {
	Type string `json:"type"` // userMessage, agentMessage, reasoning, commandExecution, fileChange, …
	ID   string `json:"id"`
	// commandExecution
	Command string `json:"command,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	// fileChange
	Changes []FileUpdateChange `json:"changes,omitempty"`
	Status  string             `json:"status,omitempty"`
}

// FileUpdateChange is one file of a fileChange item: its path, kind and
// unified diff.
type FileUpdateChange struct {
	Path string          `json:"path"`
	Kind json.RawMessage `json:"kind,omitempty"` // {"type":"add"} | {"type":"update","move_path":…} | …
	Diff string          `json:"diff"`
}

// KindName is the change's kind (add, delete, update).
func (c FileUpdateChange) KindName() string {
	var k struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(c.Kind, &k) == nil && k.Type != "" {
		return k.Type
	}
	var s string
	_ = json.Unmarshal(c.Kind, &s)
	return s
}

// DeltaNotification is item/agentMessage/delta's params.
type DeltaNotification struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Delta    string `json:"delta"`
}

// TurnDiffNotification is turn/diff/updated's params: the turn's changes
// as one unified diff.
type TurnDiffNotification struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	Diff     string `json:"diff"`
}

// ErrorNotification is error's params.
type ErrorNotification struct {
	ThreadID  string       `json:"threadId"`
	TurnID    string       `json:"turnId"`
	Error     AppTurnError `json:"error"`
	WillRetry bool         `json:"willRetry"`
}

// WarningNotification is warning's and configWarning's params.
type WarningNotification struct {
	Message string `json:"message,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// ResolvedNotification is serverRequest/resolved's params: app-server no
// longer waits for the request's answer.
type ResolvedNotification struct {
	ThreadID  string          `json:"threadId"`
	RequestID json.RawMessage `json:"requestId"`
}

// CommandApprovalParams is item/commandExecution/requestApproval's
// params.
type CommandApprovalParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	// ApprovalID tells apart several callbacks of one item.
	ApprovalID *string `json:"approvalId,omitempty"`
	Command    *string `json:"command,omitempty"`
	Cwd        *string `json:"cwd,omitempty"`
	// Reason is the model's justification.
	Reason *string `json:"reason,omitempty"`
	// Kind: command (default), writeStdin, humanCommand.
	Kind                        string   `json:"kind,omitempty"`
	ProposedExecpolicyAmendment []string `json:"proposedExecpolicyAmendment,omitempty"`
	// AdditionalPermissions (file system entries, the network) and
	// NetworkApprovalContext (a host of the managed network) are granted
	// with the command when it is accepted.
	AdditionalPermissions  json.RawMessage `json:"additionalPermissions,omitempty"`
	NetworkApprovalContext json.RawMessage `json:"networkApprovalContext,omitempty"`
}

// FileChangeApprovalParams is item/fileChange/requestApproval's params:
// the changes are those of the item/started fileChange ItemID.
type FileChangeApprovalParams struct {
	ThreadID  string  `json:"threadId"`
	TurnID    string  `json:"turnId"`
	ItemID    string  `json:"itemId"`
	Reason    *string `json:"reason,omitempty"`
	GrantRoot *string `json:"grantRoot,omitempty"`
}

// PermissionsApprovalParams is item/permissions/requestApproval's params:
// more file system or network access for the turn or the session.
type PermissionsApprovalParams struct {
	ThreadID    string          `json:"threadId"`
	TurnID      string          `json:"turnId"`
	ItemID      string          `json:"itemId"`
	Cwd         string          `json:"cwd"`
	Reason      *string         `json:"reason,omitempty"`
	Permissions json.RawMessage `json:"permissions"`
}

// UserInputParams is item/tool/requestUserInput's params: questions for
// the user, each with options.
type UserInputParams struct {
	ThreadID  string              `json:"threadId"`
	TurnID    string              `json:"turnId"`
	ItemID    string              `json:"itemId"`
	Questions []UserInputQuestion `json:"questions"`
}

// UserInputQuestion is one question of requestUserInput.
type UserInputQuestion struct {
	ID       string            `json:"id"`
	Header   string            `json:"header"`
	Question string            `json:"question"`
	IsOther  bool              `json:"isOther,omitempty"`
	IsSecret bool              `json:"isSecret,omitempty"`
	Options  []UserInputOption `json:"options,omitempty"`
}

// UserInputOption is one choice of a question.
type UserInputOption struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// UserInputAnswer is requestUserInput's answer to one question.
type UserInputAnswer struct {
	Answers []string `json:"answers"`
}

// UserInputResponse is requestUserInput's answer: answers by question id.
type UserInputResponse struct {
	Answers map[string]UserInputAnswer `json:"answers"`
}

// ElicitationParams is mcpServer/elicitation/request's params (only the
// fields shown).
type ElicitationParams struct {
	ThreadID   string  `json:"threadId"`
	TurnID     *string `json:"turnId,omitempty"`
	ServerName string  `json:"serverName"`
	Message    string  `json:"message"`
	Mode       string  `json:"mode"`
	URL        string  `json:"url,omitempty"`
}

// LegacyPatchParams is applyPatchApproval's params.
type LegacyPatchParams struct {
	CallID         string                     `json:"callId"`
	ConversationID string                     `json:"conversationId"`
	FileChanges    map[string]json.RawMessage `json:"fileChanges"`
	Reason         *string                    `json:"reason,omitempty"`
	GrantRoot      *string                    `json:"grantRoot,omitempty"`
}

// LegacyExecParams is execCommandApproval's params.
type LegacyExecParams struct {
	CallID         string   `json:"callId"`
	ConversationID string   `json:"conversationId"`
	Command        []string `json:"command"`
	Cwd            string   `json:"cwd"`
	Reason         *string  `json:"reason,omitempty"`
}

// DynamicToolParams is item/tool/call's params: a tool the client was
// to provide.
type DynamicToolParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	CallID   string `json:"callId"`
	Tool     string `json:"tool"`
}

// Decisions of an approval (item/commandExecution/requestApproval,
// item/fileChange/requestApproval).
const (
	DecisionAccept           = "accept"
	DecisionAcceptForSession = "acceptForSession"
	DecisionDecline          = "decline"
	DecisionCancel           = "cancel"
)

// DecisionResponse is an approval's answer.
type DecisionResponse struct {
	Decision any `json:"decision"`
}

// LegacyDecision is the answer to applyPatchApproval and
// execCommandApproval (ReviewDecision): approved, approved_for_session,
// {"denied":{"rejection":reason}} or abort.
func LegacyDecision(decision, reason string) DecisionResponse {
	switch decision {
	case DecisionAccept:
		return DecisionResponse{Decision: "approved"}
	case DecisionAcceptForSession:
		return DecisionResponse{Decision: "approved_for_session"}
	case DecisionCancel:
		return DecisionResponse{Decision: "abort"}
	}
	return DecisionResponse{Decision: map[string]any{"denied": map[string]string{"rejection": reason}}}
}

// Decline answers r with its method's refusal: an approval declined
// (cancel: the turn is interrupted too), no permission granted, no answer
// to the questions, an elicitation declined, a tool call failed with
// reason; an error for anything else (a method ccrelay does not know,
// a login refresh, an attestation). It reports the error writing it.
func Decline(r *Request, reason string, cancel bool) error {
	decision := DecisionDecline
	if cancel {
		decision = DecisionCancel
	}
	switch r.Method {
	case RequestCommandApproval, RequestFileChangeApproval:
		return r.Reply(DecisionResponse{Decision: decision})
	case RequestLegacyPatch, RequestLegacyExec:
		return r.Reply(LegacyDecision(decision, reason))
	case RequestPermissions:
		return r.Reply(map[string]any{"permissions": map[string]any{}, "scope": "turn"})
	case RequestUserInput:
		return r.Reply(UserInputResponse{Answers: map[string]UserInputAnswer{}})
	case RequestElicitation:
		action := "decline"
		if cancel {
			action = "cancel"
		}
		return r.Reply(map[string]any{"action": action, "content": nil})
	case RequestDynamicTool:
		return r.Reply(map[string]any{"success": false,
			"contentItems": []map[string]string{{"type": "inputText", "text": reason}}})
	case RequestAuthRefresh, RequestAttestation:
		return r.Fail(CodeRefused, reason)
	}
	return r.Fail(CodeMethodNotFound, "ccrelay does not handle "+clipText(r.Method, 200)+": "+reason)
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
