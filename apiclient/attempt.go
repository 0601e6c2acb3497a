package apiclient

import (
	"context"
	"net/http/httptrace"
	"time"
)

// Stage is how far the client's current attempt to talk to the relay got.
type Stage int

const (
	// StageNone: no connection to the relay (none tried yet, or the
	// machine or its port did not take one).
	StageNone Stage = iota
	// StageTaken: the relay's machine took the connection, and the
	// relay has not answered the websocket upgrade.
	StageTaken
	// StageUpgraded: the relay accepted the websocket, and has not
	// answered a frame on it.
	StageUpgraded
	// StageConnected: the relay answered on the connection (Connected).
	StageConnected
)

// Attempt reports how far the current attempt to talk to the relay got
// and since when it stands there (zero with StageNone).
func (c *Client) Attempt() (Stage, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stage, c.stageSince
}

// setStage records that the current attempt reached s.
func (c *Client) setStage(s Stage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == c.stage {
		return
	}
	c.stage, c.stageSince = s, time.Now()
	if s == StageNone {
		c.stageSince = time.Time{}
	}
}

// traceTaken returns ctx with a trace that marks the attempt StageTaken
// once the relay's machine took the connection.
func (c *Client) traceTaken(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { c.setStage(StageTaken) },
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				c.setStage(StageTaken)
			}
		},
	})
}
