package relay

import (
	"context"
	"encoding/json"
	"sync"
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
// routing never waits on a socket. The queue is a slice that grows as
// frames wait (an idle connection holds none: most app connections are
// idle, and a preallocated buffer was a third of their cost). The writer
// is a goroutine only while there is something to write: kick starts it,
// and it ends once nothing waits (an idle connection pays no stack for
// it).
type peer struct {
	c     *websocket.Conn
	owner string
	// device is the credential id of an app connection of a device (for
	// its session keys); "" for a CLI or a bootstrap token.
	device string

	mu      sync.Mutex
	queue   [][]byte // frames waiting for run, in order
	queued  int      // bytes in queue
	ctx     context.Context
	writing bool // under mu: run is under way
	again   bool // under mu: kicked while run was under way
	stopped bool // under mu: no writer starts any more
	writer  sync.WaitGroup

	dropOnce sync.Once
	dropped  chan struct{} // the queue overflowed: the connection is dropped

	list *lister    // under mu: the session list changes run also writes
	subs []*liveSub // under mu: the caught-up subscriptions run also serves
}

// liveSub is a subscription past its history: run hands each batch to
// deliver, and an error (or the subscriber falling behind) to end, after
// which it serves the subscription no more.
type liveSub struct {
	sub     *subscriber
	deliver func(*published) error
	end     func(error)
}

func newPeer(c *websocket.Conn, owner string) *peer {
	return &peer{c: c, owner: owner, dropped: make(chan struct{})}
}

// start lets kick start the writer, until ctx ends or stop; a peer not
// started queues frames and writes none.
func (p *peer) start(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	p.kick() // what was queued before
}

// stop waits for the writer under way, if any, and starts none after.
// The connection's handler calls it once ctx has ended.
func (p *peer) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.writer.Wait()
}

// kick makes the writer write what waits: it starts it, or, if it is
// under way, makes it look again before it ends.
func (p *peer) kick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.ctx == nil || p.stopped:
	case p.writing:
		p.again = true
	default:
		p.writing = true
		p.writer.Add(1)
		go p.run(p.ctx)
	}
}

// send queues f for the connection and never blocks; it reports false when
// the queue is full (PeerQueue frames or PeerQueueBytes), and the
// connection is then dropped.
func (p *peer) send(f protocol.Frame) bool {
	f.V = protocol.FrameVersion
	b, err := json.Marshal(f)
	if err != nil {
		return false
	}
	p.mu.Lock()
	if len(p.queue) >= PeerQueue || p.queued+len(b) > PeerQueueBytes {
		p.mu.Unlock()
		p.drop()
		return false
	}
	p.queue = append(p.queue, b)
	p.queued += len(b)
	p.mu.Unlock()
	p.kick()
	return true
}

// next takes the oldest waiting frame, if any.
func (p *peer) next() ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
		return nil, false
	}
	b := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	p.queued -= len(b)
	return b, true
}

// listen makes run write l's changes too (nil: no more).
func (p *peer) listen(l *lister) {
	p.mu.Lock()
	p.list = l
	p.mu.Unlock()
	p.kick() // changes may wait already
}

// follow makes run serve l from now on.
func (p *peer) follow(l *liveSub) {
	p.mu.Lock()
	p.subs = append(p.subs, l)
	p.mu.Unlock()
	p.kick() // batches may wait already
}

// serveSubs hands every waiting batch of the live subscriptions to them;
// it reports whether it handed any.
func (p *peer) serveSubs() bool {
	p.mu.Lock()
	subs := p.subs
	p.mu.Unlock()
	served := false
	for _, l := range subs {
		for {
			var err error
			select {
			case <-l.sub.dropped:
				err = errFellBehind
			default:
			}
			var pub *published
			if err == nil {
				var ok bool
				if pub, ok = l.sub.next(); !ok {
					break
				}
				served = true
				err = l.deliver(pub)
			}
			if err != nil {
				p.unfollow(l)
				l.end(err)
				break
			}
		}
	}
	return served
}

// unfollow: run serves l no more.
func (p *peer) unfollow(l *liveSub) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.subs {
		if x == l {
			p.subs = append(p.subs[:i:i], p.subs[i+1:]...)
			return
		}
	}
}

// nextChange takes the oldest waiting change of the session list, if
// any; dropped reports that the list fell behind.
func (p *peer) nextChange() (b []byte, ok, dropped bool) {
	p.mu.Lock()
	l := p.list
	p.mu.Unlock()
	if l == nil {
		return nil, false, false
	}
	select {
	case <-l.dropped:
		return nil, false, true
	default:
	}
	b, ok = l.next()
	return b, ok, false
}

// drop marks the connection dropped; its writer closes it.
func (p *peer) drop() {
	p.dropOnce.Do(func() { close(p.dropped) })
	p.kick()
}

// run writes the queued frames, the changes of the session list it
// listens to and the batches of its caught-up subscriptions, until none
// waits, ctx ends, a write fails, or the connection is dropped. kick
// starts it; the connection's handler waits for it (stop). One writer
// serves all of them, and only while they have something to write.
func (p *peer) run(ctx context.Context) {
	defer p.writer.Done()
	for {
		if !p.writeWaiting(ctx) {
			p.mu.Lock()
			p.writing, p.again = false, false
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if !p.again {
			p.writing = false
			p.mu.Unlock()
			return
		}
		p.again = false
		p.mu.Unlock()
	}
}

// writeWaiting writes what waits; false means the connection is done
// (ended, dropped, or a write failed).
func (p *peer) writeWaiting(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-p.dropped:
			p.c.Close(websocket.StatusTryAgainLater, "the connection fell behind; connect again")
			return false
		default:
		}
		b, ok := p.next()
		if !ok {
			var listDropped bool
			b, ok, listDropped = p.nextChange()
			if listDropped {
				p.c.Close(websocket.StatusTryAgainLater, "session list fell behind; list again")
				return false
			}
		}
		if !ok {
			if p.serveSubs() {
				continue // frames may have been queued meanwhile
			}
			return true
		}
		wctx, cancel := context.WithTimeout(ctx, PeerWriteTimeout)
		err := p.c.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			p.drop()
			p.c.CloseNow()
			return false
		}
	}
}
