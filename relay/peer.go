package relay

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// Limits of a connection's outgoing queue (docs/protocol.md, "Limits:
// fields and sizes").
const (
	// PeerQueue and PeerQueueBytes bound the frames routed to one
	// connection (commands to a CLI, statuses to an app) that wait to be
	// written; a connection that lets more pile up is dropped (close
	// 1013), never waited on.
	PeerQueue      = 1024
	PeerQueueBytes = 4 << 20
	// PeerWriteTimeout bounds the write of one queued frame; a connection
	// that takes longer is dropped.
	PeerWriteTimeout = 10 * time.Second
)

// peer is one websocket connection as other goroutines see it: frames for
// it go through its own queue, written by its own writer (run), so that
// routing never waits on a socket.
type peer struct {
	c      *websocket.Conn
	owner  string
	out    chan []byte
	queued atomic.Int64 // bytes in out

	dropOnce sync.Once
	dropped  chan struct{} // the queue overflowed: the connection is dropped
}

func newPeer(c *websocket.Conn, owner string) *peer {
	return &peer{c: c, owner: owner, out: make(chan []byte, PeerQueue), dropped: make(chan struct{})}
}

// send queues f for the connection and never blocks; it reports false when
// the queue is full, and the connection is then dropped.
func (p *peer) send(f protocol.Frame) bool {
	f.V = protocol.FrameVersion
	b, err := json.Marshal(f)
	if err != nil {
		return false
	}
	if p.queued.Add(int64(len(b))) > PeerQueueBytes {
		p.queued.Add(-int64(len(b)))
		p.drop()
		return false
	}
	select {
	case p.out <- b:
		return true
	default:
		p.queued.Add(-int64(len(b)))
		p.drop()
		return false
	}
}

func (p *peer) drop() { p.dropOnce.Do(func() { close(p.dropped) }) }

// run writes the queued frames until ctx ends, a write fails, or the
// connection is dropped. Its caller (the connection's handler) owns it.
func (p *peer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.dropped:
			p.c.Close(websocket.StatusTryAgainLater, "the connection fell behind; connect again")
			return
		case b := <-p.out:
			p.queued.Add(-int64(len(b)))
			wctx, cancel := context.WithTimeout(ctx, PeerWriteTimeout)
			err := p.c.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				p.drop()
				p.c.CloseNow()
				return
			}
		}
	}
}
