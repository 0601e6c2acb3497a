package protocol

import "encoding/json"

// FrameVersion is the version of the relay wire protocol. Every frame
// carries it; a peer refuses frames of a version it does not speak.
const FrameVersion = 1

// Frame types of the relay wire protocol (JSON text frames over websocket).
const (
	// CLI → relay.
	FrameEnvelopes = "envelopes" // a batch of envelopes of one session
	FrameAnnounce  = "announce"  // what a session is: cwd, title, mode, status, …
	// relay → CLI.
	FrameAck = "ack" // what was stored, with sequence numbers
	// app → relay.
	FrameSubscribe = "subscribe" // a session, from a sequence number
	FrameList      = "list"      // the sessions, then their changes as they happen
	// relay → app.
	FrameSessions = "sessions"  // the list of sessions (answer to list)
	FrameSession  = "session"   // one session changed (after list)
	FrameBatch    = "batch"     // stored envelopes with their sequence numbers, in order
	FrameCaughtUp = "caught-up" // history sent; live envelopes follow
	FrameError    = "error"     // a frame could not be handled; the connection stays usable
)

// Frame is one message between a CLI or an app and the relay. Only the
// fields of its type are set.
type Frame struct {
	V    int    `json:"v"`
	Type string `json:"type"`
	// Session the frame is about.
	Session string `json:"session,omitempty"`
	// Envelopes (FrameEnvelopes): raw envelope JSON, in order.
	Envelopes []json.RawMessage `json:"envelopes,omitempty"`
	// Acks (FrameAck): one per envelope of the batch, in order.
	Acks []Ack `json:"acks,omitempty"`
	// After (FrameSubscribe): send envelopes with a greater sequence number.
	After int64 `json:"after,omitempty"`
	// Info (FrameAnnounce): the session's description, a JSON object with
	// cwd, title, machine, mode (local|remote), status
	// (idle|busy|waiting-for-permission), model, permissionMode.
	Info json.RawMessage `json:"info,omitempty"`
	// Sessions (FrameSessions, FrameSession: one).
	Sessions []SessionSummary `json:"sessions,omitempty"`
	// Items (FrameBatch): consecutive stored envelopes.
	Items []Item `json:"items,omitempty"`
	// Seq (FrameCaughtUp).
	Seq int64 `json:"seq,omitempty"`
	// Error (FrameError).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
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
	LastSeq int64           `json:"lastSeq"`
	Updated int64           `json:"updated"` // Unix ms of the last activity
}
