package protocol

import "encoding/json"

// FrameVersion is the version of the relay wire protocol. Every frame
// carries it; a peer refuses frames of a version it does not speak.
const FrameVersion = 1

// Frame types of the relay wire protocol (JSON text frames over websocket).
const (
	// CLI → relay.
	FrameEnvelopes = "envelopes" // a batch of envelopes of one session
	// relay → CLI.
	FrameAck = "ack" // what was stored, with sequence numbers
	// app → relay.
	FrameSubscribe = "subscribe" // a session, from a sequence number
	// relay → app.
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
