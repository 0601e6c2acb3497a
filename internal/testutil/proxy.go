package testutil

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// CutProxy forwards TCP connections on 127.0.0.1 to a target and cuts each
// one after a random number of bytes sent to the target (seeded, so a
// failure can be replayed).
type CutProxy struct {
	Addr string

	ln     net.Listener
	target string
	min    int
	span   int
	mu     sync.Mutex
	rng    *rand.Rand
	cuts   int
	wg     sync.WaitGroup
}

// StartCutProxy serves until the test ends. Each connection is cut after
// min to min+span bytes.
func StartCutProxy(t testing.TB, target string, seed uint64, min, span int) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{Addr: ln.Addr().String(), ln: ln, target: target, min: min, span: span, rng: rand.New(rand.NewPCG(seed, seed))}
	p.wg.Go(p.serve)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// Cuts is how many connections were cut so far.
func (p *CutProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *CutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		budget := int64(p.min + p.rng.IntN(p.span))
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, budget) })
	}
}

func (p *CutProxy) pipe(c net.Conn, budget int64) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(c, s); done <- struct{}{} }()
	go func() {
		n, _ := io.CopyN(s, c, budget)
		if n == budget {
			p.mu.Lock()
			p.cuts++
			p.mu.Unlock()
		}
		done <- struct{}{}
	}()
	<-done // either side ending (or the cut) ends both
}
