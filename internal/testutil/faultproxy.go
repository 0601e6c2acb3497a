package testutil

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// FaultProxy forwards TCP connections on 127.0.0.1 to a target and fails
// them as a bad network does:
//
//   - Blackhole freezes every open connection, for good: nothing more
//     passes either way and neither end is closed (no FIN, no RST), as when
//     a phone changes networks or a NAT forgets a flow. New connections
//     pass as usual.
//   - A dead zone (SetDeadZone) holds new connections: accepted, nothing
//     passes, as a connect that hangs. When it ends, those whose client is
//     still waiting go through, unless LoseHeld was called: then they stay
//     held until their client gives up, as connects whose packets were
//     lost (the client's stack would retry them seconds later).
//
// It sees the target close its end of a frozen connection (what the target
// sends is read and dropped), so a test can count how long the target
// keeps a dead connection (OpenTo).
type FaultProxy struct {
	Addr string

	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	conns    map[*faultConn]struct{}
	zone     *deadZone // non-nil during a dead zone
	accepted int
	held     int
	closed   bool
}

// deadZone: end is closed when the zone ends; lost, by LoseHeld.
type deadZone struct {
	end, lost chan struct{}
	loseOnce  sync.Once
}

type faultConn struct {
	client, upstream net.Conn
	path             string        // of the first request the client sent
	frozen           chan struct{} // closed by Blackhole
	freeze           sync.Once
	targetOpen       bool // the target has not closed its end
}

// StartFaultProxy serves until the test ends.
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{Addr: ln.Addr().String(), ln: ln, target: target, conns: map[*faultConn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *FaultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	if p.zone != nil {
		close(p.zone.end)
		p.zone = nil
	}
	for c := range p.conns {
		c.client.Close()
		if c.upstream != nil {
			c.upstream.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Blackhole freezes every connection open now and returns how many.
func (p *FaultProxy) Blackhole() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.freeze.Do(func() { close(c.frozen) })
	}
	return len(p.conns)
}

// SetDeadZone starts (on) or ends a dead zone.
func (p *FaultProxy) SetDeadZone(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.zone == nil && !p.closed:
		p.zone = &deadZone{end: make(chan struct{}), lost: make(chan struct{})}
	case !on && p.zone != nil:
		close(p.zone.end)
		p.zone = nil
	}
}

// LoseHeld makes the connections the current dead zone holds never go
// through, even after it ends: they hang until their client closes them.
func (p *FaultProxy) LoseHeld() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if z := p.zone; z != nil {
		z.loseOnce.Do(func() { close(z.lost) })
	}
}

// Accepted is how many connections the proxy accepted so far; Held, how
// many of them a dead zone held.
func (p *FaultProxy) Accepted() (accepted, held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.held
}

// OpenTo counts the connections whose first request's path starts with
// path (e.g. "/ws/app") and whose target has not closed its end, frozen
// ones included.
func (p *FaultProxy) OpenTo(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if c.targetOpen && strings.HasPrefix(c.path, path) {
			n++
		}
	}
	return n
}

func (p *FaultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		fc := &faultConn{client: c, frozen: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.accepted++
		zone := p.zone
		if zone != nil {
			p.held++
		}
		p.conns[fc] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(fc, zone) })
	}
}

func (p *FaultProxy) forget(c *faultConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.client.Close()
	if c.upstream != nil {
		c.upstream.Close()
	}
}

func (p *FaultProxy) pipe(c *faultConn, zone *deadZone) {
	if zone != nil {
		// A connect that hangs until the zone ends, or for good once lost.
		select {
		case <-zone.end:
		case <-zone.lost:
		}
		select {
		case <-zone.lost:
			io.Copy(io.Discard, c.client) // until the client closes it
			p.forget(c)
			return
		default:
		}
	}
	up, err := net.Dial("tcp", p.target)
	p.mu.Lock()
	if err != nil || p.closed {
		p.mu.Unlock()
		if up != nil {
			up.Close()
		}
		p.forget(c)
		return
	}
	c.upstream, c.targetOpen = up, true
	p.mu.Unlock()

	// The first request line names the connection (see OpenTo).
	br := bufio.NewReader(c.client)
	if line, err := br.ReadSlice('\n'); err == nil || len(line) > 0 {
		if f := strings.Fields(string(line)); len(f) >= 2 {
			p.mu.Lock()
			c.path = f[1]
			p.mu.Unlock()
		}
		if _, werr := up.Write(line); err != nil || werr != nil {
			p.forget(c)
			return
		}
	}
	ended := make(chan bool, 2) // true: the copy ended while not frozen
	go func() { ended <- p.copy(c, up, br, false) }()
	go func() { ended <- p.copy(c, c.client, up, true) }()
	if <-ended {
		p.forget(c) // either side ending ends both, as a connection does
		<-ended
		return
	}
	<-ended // frozen: wait for both directions (ended by close)
}

// copy forwards from src to dst until src ends, and reports whether it
// ended unfrozen. Once c is frozen, what arrives is dropped; the end of a
// frozen connection's target is recorded, and not passed on.
func (p *FaultProxy) copy(c *faultConn, dst net.Conn, src interface{ Read([]byte) (int, error) }, fromTarget bool) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-c.frozen:
			if err != nil {
				if fromTarget {
					p.mu.Lock()
					c.targetOpen = false
					p.mu.Unlock()
				}
				return false
			}
			continue
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return true
			}
		}
		if err != nil {
			return true
		}
	}
}
