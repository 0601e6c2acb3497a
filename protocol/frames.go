package protocol

import "encoding/json"

// FrameVersion is the version of the relay wire protocol. Every frame
// carries it; a peer refuses frames of a version it does not speak.
const FrameVersion = 1

// Frame types of the relay wire protocol (JSON text frames over websocket).
const (
	// CLI → relay.
	FrameEnvelopes = "envelopes"      // a batch of envelopes of one session
	FrameAnnounce  = "announce"       // what a session is: cwd, title, mode, status, …
	FrameResult    = "command-result" // what became of a command the CLI received
	FrameLive      = "live"           // CLI → relay → apps: not stored (token deltas); also relay → app
	FrameKeys      = "keys"           // a session's key, wrapped for devices (end to end encryption)
	// relay → CLI.
	FrameAck     = "ack"     // what was stored, with sequence numbers
	FrameDevices = "devices" // the account's devices that have keys
	// app → relay.
	FrameSubscribe  = "subscribe"  // a session, from a sequence number
	FrameList       = "list"       // the sessions, then their changes as they happen
	FrameCommand    = "command"    // app → relay → CLI: a prompt, a permission answer, …
	FrameVisibility = "visibility" // which session the app shows, and whether visibly (no push for it then)
	FrameBlob       = "blob"       // app → relay: the blob of an envelope (Session, ID); relay → app: it (Blobs), or an error
	// relay → app.
	FrameSessions   = "sessions"       // the list of sessions (answer to list)
	FrameSession    = "session"        // one session changed (after list)
	FrameStatus     = "command-status" // where a command stands: queued, delivered, done, rejected
	FrameBatch      = "batch"          // stored envelopes with their sequence numbers, in order
	FrameCaughtUp   = "caught-up"      // history sent; live envelopes follow
	FrameError      = "error"          // a frame could not be handled; the connection stays usable
	FrameSessionKey = "session-key"    // a session's key wrapped for this device, and the machine that wrapped it
)

// Frame is one message between a CLI or an app and the relay. Only the
// fields of its type are set.
type Frame struct {
	V    int    `json:"v"`
	Type string `json:"type"`
	// Ref is chosen by a CLI for a frame it sends; the relay's reply (ack
	// or error) carries it back.
	Ref string `json:"ref,omitempty"`
	// Session the frame is about.
	Session string `json:"session,omitempty"`
	// Envelopes (FrameEnvelopes): raw envelope JSON, in order.
	Envelopes []json.RawMessage `json:"envelopes,omitempty"`
	// Blobs (FrameEnvelopes): the content kept beside envelopes of the
	// batch (Envelope.Blob), at most one per envelope. FrameBlob (app ↔
	// relay): the one asked for.
	Blobs []Blob `json:"blobs,omitempty"`
	// Devices (FrameDevices).
	Devices []DeviceInfo `json:"devices,omitempty"`
	// Keys (FrameKeys): the session's key wrapped for devices.
	Keys []WrappedKey `json:"keys,omitempty"`
	// Wrapped (FrameSessionKey): the session key wrapped for the app's
	// device; Machine (FrameKeys, FrameSessionKey): the public key of the
	// machine that wrapped it (base64url), which the app must know from
	// pairing.
	Wrapped string `json:"wrapped,omitempty"`
	Machine string `json:"machine,omitempty"`
	// ID (FrameBlob): the envelope whose blob an app asks for.
	ID string `json:"id,omitempty"`
	// Acks (FrameAck): one per envelope of the batch, in order.
	Acks []Ack `json:"acks,omitempty"`
	// After (FrameSubscribe): send envelopes with a greater sequence number.
	After int64 `json:"after,omitempty"`
	// Before (FrameSubscribe), when above 0: send only envelopes with a
	// smaller sequence number, then caught-up, and nothing live (a part
	// of history, read up to where what is shown starts).
	Before int64 `json:"before,omitempty"`
	// Payload (FrameLive): any JSON object, passed to the apps as is.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Info (FrameAnnounce): the session's description, a JSON object with
	// cwd, title, machine, mode (local|remote), status
	// (idle|busy|waiting-for-permission), model, permissionMode.
	Info json.RawMessage `json:"info,omitempty"`
	// Command (FrameCommand; FrameResult and FrameStatus carry its id).
	Command *Command `json:"command,omitempty"`
	// Status (FrameStatus, FrameResult): queued, delivered, done, rejected.
	Status string `json:"status,omitempty"`
	// SealedMessage (FrameResult, FrameStatus), for a session that is
	// end-to-end encrypted: the result's message sealed by the machine
	// under the session's key for (session, ResultSealID(command id), from
	// the machine). Message then holds SealedResultMessage, a text with
	// nothing of the session, for apps that cannot open it.
	SealedMessage string `json:"sealedMessage,omitempty"`
	// Device (FrameVisibility): the app's device id; Visible: whether
	// Session is shown on a visible page.
	Device  string `json:"device,omitempty"`
	Visible bool   `json:"visible,omitempty"`
	// Sessions (FrameSessions, FrameSession: one).
	Sessions []SessionSummary `json:"sessions,omitempty"`
	// Limit (FrameList): list a page of at most Limit sessions, newest
	// first, after Cursor ("": the first page), those passing Filter. The
	// answer (FrameSessions) carries the Cursor it was asked with and Next,
	// where the next page starts ("": this was the last). A FrameList
	// without Limit lists every session in one frame (apps before paging).
	Limit  int         `json:"limit,omitempty"`
	Cursor string      `json:"cursor,omitempty"`
	Next   string      `json:"next,omitempty"`
	Filter *ListFilter `json:"filter,omitempty"`
	// Items (FrameBatch): consecutive stored envelopes.
	Items []Item `json:"items,omitempty"`
	// Seq (FrameCaughtUp).
	Seq int64 `json:"seq,omitempty"`
	// Error (FrameError).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// MaxListQuery is the most characters of a list search (FrameList's
// Filter.Query).
const MaxListQuery = 200

// MaxListFilterField is the most bytes of a list filter's Machine or
// Folder (a machine's name, a working directory).
const MaxListFilterField = 4096

// ListFilter is what a paged list holds (FrameList): sessions in State
// (waiting, working, finished; "": any), on Machine, in Folder (a cwd), with
// every word of Query in their title, first prompt, folder or machine. The
// relay cannot read a sealed session's summary: it lists every sealed
// session for the app to judge once opened.
//
// Session, instead, asks for that one session (a page of it alone, or
// empty): an app opening a session it has not listed.
type ListFilter struct {
	Session string `json:"session,omitempty"`
	Query   string `json:"q,omitempty"`
	State   string `json:"state,omitempty"`
	Machine string `json:"machine,omitempty"`
	Folder  string `json:"folder,omitempty"`
}

// Blob is the content kept beside an envelope (Envelope.Blob). Data is
// base64 (standard, padded) in JSON.
type Blob struct {
	ID   string `json:"id"`
	Data []byte `json:"data"`
}

// Ack says an envelope is stored under Seq.
type Ack struct {
	ID  string `json:"id"`
	Seq int64  `json:"seq"`
}

// Item is a stored envelope with its sequence number.
type Item struct {
	Seq      int64           `json:"seq"`
	Envelope json.RawMessage `json:"envelope"`
}

// SessionSummary is a session as the relay lists it.
type SessionSummary struct {
	ID      string          `json:"id"`
	Info    json.RawMessage `json:"info"`
	Prompt  string          `json:"prompt,omitempty"` // the session's first prompt (≤ 200 characters)
	LastSeq int64           `json:"lastSeq"`
	Updated int64           `json:"updated"`           // Unix ms of the last activity
	Deleted bool            `json:"deleted,omitempty"` // the session was deleted: apps drop it
}

// Command kinds an app can send.
const (
	CommandPrompt         = "prompt"
	CommandPermission     = "permission"
	CommandAbort          = "abort"
	CommandSwitch         = "switch"
	CommandModel          = "model"
	CommandPermissionMode = "permission-mode"
	// CommandStopTask stops one background subagent (Subagent), not the
	// turn.
	CommandStopTask = "stop-task"
	// CommandStart (to a machine's daemon, `ccrelay daemon`) starts a
	// remote-mode session in Dir: a new one with the id Target, or, with
	// Resume, Claude Code's past session Target; Model, Mode (the
	// permission mode) and Text (the first prompt) are optional.
	CommandStart = "start"
	// CommandStop (to a machine's daemon) ends the session Target that the
	// daemon started, and its Claude.
	CommandStop = "stop"
)

// Command statuses.
const (
	StatusQueued    = "queued"    // stored; the session's CLI is not connected
	StatusDelivered = "delivered" // handed to the CLI
	StatusDone      = "done"      // the CLI carried it out
	StatusRejected  = "rejected"  // refused; Message says why
)

// SealedResultMessage is the readable message of a command result whose
// message is sealed (Frame.SealedMessage): what an app that cannot open it
// shows, and all the relay reads.
const SealedResultMessage = "the machine's reason is end-to-end encrypted; open this session on a device that has its key to read it"

// ResultSealID is the id in the associated data of a command result's
// sealed message: the command's id and "/result", so that it opens for
// that command's result alone (not for an envelope, a blob or another
// command's result).
func ResultSealID(commandID string) string { return commandID + "/result" }

// Command is something an app asks of a session's CLI.
type Command struct {
	ID   string `json:"id"` // chosen by the app (a fresh cuid2); resending is safe
	Kind string `json:"kind"`
	// prompt
	Text string `json:"text,omitempty"`
	// permission: the request answered, allow or deny, a reason, edited
	// input, and whether to allow the tool for the rest of the session.
	RequestID  string          `json:"requestId,omitempty"`
	Allow      bool            `json:"allow,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	ForSession bool            `json:"forSession,omitempty"`
	// switch (local|remote), permission-mode, model
	Mode  string `json:"mode,omitempty"`
	Model string `json:"model,omitempty"`
	// stop-task: the subagent (its envelopes' subagent id)
	Subagent string `json:"subagent,omitempty"`
	// start, stop (to a daemon): the folder to start in, the session, and
	// whether Target is a past session to continue.
	Dir    string `json:"dir,omitempty"`
	Target string `json:"target,omitempty"`
	Resume bool   `json:"resume,omitempty"`
	// start: the agent to run (AgentClaude or AgentCodex; "": Claude).
	Agent string `json:"agent,omitempty"`
	// Sealed (end-to-end encryption): the whole command's JSON sealed by
	// the device under the session's key for (session, id, from the
	// device); then no other field but id and kind is set.
	Sealed string `json:"sealed,omitempty"`
}

// ValidCommandKind reports whether k is a known kind.
func ValidCommandKind(k string) bool {
	switch k {
	case CommandPrompt, CommandPermission, CommandAbort, CommandSwitch, CommandModel, CommandPermissionMode, CommandStopTask,
		CommandStart, CommandStop:
		return true
	}
	return false
}
