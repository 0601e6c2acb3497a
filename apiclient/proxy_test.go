package apiclient

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// cutProxy forwards TCP connections to target and cuts each one after a
// random number of bytes (seeded, so a failure can be replayed).
type cutProxy struct {
	ln     net.Listener
	target string
	rng    *rand.Rand
	mu     sync.Mutex
	cuts   int
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, target string, seed uint64) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, rng: rand.New(rand.NewPCG(seed, seed))}
	p.wg.Go(p.serve)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		budget := int64(2000 + p.rng.IntN(60000)) // bytes before the cut
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, budget) })
	}
}

func (p *cutProxy) pipe(c net.Conn, budget int64) {
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

// (c) A proxy that cuts the connection at random points: the relay still
// stores every envelope exactly once, in order.
func TestClientThroughCuttingProxy(t *testing.T) {
	r := newRelay(t)
	proxy := startCutProxy(t, r.addr, 42)
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	rc := runClient(Config{URL: "http://" + proxy.ln.Addr().String(), Token: token, BatchSize: 40,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, box)
	ctx := context.Background()
	const n = 3000
	all := envs("S", 0, n)
	for i := 0; i < n; i += 250 {
		if err := box.Append(ctx, "S", all[i:i+250]); err != nil {
			t.Fatal(err)
		}
	}
	rc.finish(t)
	proxy.mu.Lock()
	cuts := proxy.cuts
	proxy.mu.Unlock()
	if cuts < 3 {
		t.Fatalf("only %d cuts: the test did not cut anything worth testing", cuts)
	}
	r.halt()
	checkStored(t, "S", r.ids("S"), all)
	t.Logf("%d envelopes through %d cut connections", n, cuts)
}
