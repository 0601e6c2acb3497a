package relay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Connection limits: how many, how long, how often. docs/protocol.md
// ("Limits: connections") says what a client sees when it meets one.
const (
	// DefaultMaxConns caps the relay's open TCP connections, of any kind:
	// websockets, HTTP requests and idle keep-alive connections.
	DefaultMaxConns = 1024
	// DefaultMaxConnsPerAddr caps the open TCP connections from one remote
	// address (an IPv6 address counts by its /64). Behind a proxy every
	// connection comes from the proxy's address: raise it there.
	DefaultMaxConnsPerAddr = 64

	// DefaultReadHeaderTimeout: a connection must send a request's headers
	// within this time of being accepted or of its previous request.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request. A websocket is not
	// affected: the deadline is cleared when it takes the connection over.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing a response (the web app's files);
	// as above, not a websocket's frames.
	DefaultWriteTimeout = 60 * time.Second
	// maxHeaderBytes bounds a request's headers (431 beyond).
	maxHeaderBytes = 64 << 10
	// DefaultIdleTimeout closes a keep-alive connection that sends no new
	// request for this long.
	DefaultIdleTimeout = 30 * time.Second

	// DefaultPingInterval is how often the relay pings every app and CLI
	// websocket; DefaultPingTimeout is how long it waits for the pong
	// before it closes the connection as dead.
	DefaultPingInterval = 30 * time.Second
	DefaultPingTimeout  = 20 * time.Second

	// DefaultLoginFailures failed logins from one address within
	// DefaultLoginWindow, and the next requests from that address are
	// answered 429 without looking at their token until the window ends.
	DefaultLoginFailures = 10
	DefaultLoginWindow   = time.Minute

	// maxLoginAddrs bounds the addresses whose failed logins are counted.
	// When that many failed within their window, further addresses share
	// one count (so they are limited together, not let through).
	maxLoginAddrs = 4096

	// refuseTimeout bounds each step of answering a connection over a cap
	// (reading its request, writing the answer, waiting for it to close);
	// maxRefusing bounds the answers under way (beyond it, connections over
	// a cap are closed without an answer).
	refuseTimeout = time.Second
	maxRefusing   = 64
)

// Limits are the relay's bounds on connections. A zero field means its
// default (the Default… constants). Set them before serving.
type Limits struct {
	MaxConns        int
	MaxConnsPerAddr int

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration

	PingInterval time.Duration
	PingTimeout  time.Duration

	LoginFailures int
	LoginWindow   time.Duration

	// CLIGoneAfter: a session whose CLI connection ended is marked in the
	// lists when no CLI holds it again within this time (gone.go).
	CLIGoneAfter time.Duration
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// withDefaults returns l with every zero field set to its default.
func (l Limits) withDefaults() Limits {
	return Limits{
		MaxConns:          orDefault(l.MaxConns, DefaultMaxConns),
		MaxConnsPerAddr:   orDefault(l.MaxConnsPerAddr, DefaultMaxConnsPerAddr),
		ReadHeaderTimeout: orDefault(l.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(l.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      orDefault(l.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       orDefault(l.IdleTimeout, DefaultIdleTimeout),
		PingInterval:      orDefault(l.PingInterval, DefaultPingInterval),
		PingTimeout:       orDefault(l.PingTimeout, DefaultPingTimeout),
		LoginFailures:     orDefault(l.LoginFailures, DefaultLoginFailures),
		LoginWindow:       orDefault(l.LoginWindow, DefaultLoginWindow),
		CLIGoneAfter:      orDefault(l.CLIGoneAfter, DefaultCLIGoneAfter),
	}
}

// addrKey is what the per-address limits count by: the remote IP, or its
// /64 for IPv6 (one host usually has a whole /64).
func addrKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// HTTPServer returns an http.Server for the relay's Handler with the
// timeouts of s.Limits. Its requests (and so the websockets) get contexts
// derived from base: cancel it to end the websockets on shutdown. Serve it
// on s.Listener(ln) for the connection caps.
func (s *Server) HTTPServer(base context.Context) *http.Server {
	l := s.Limits.withDefaults()
	s.gone.init()
	s.gone.base = base
	context.AfterFunc(base, s.stopGone) // the relay shuts down: no session is marked gone
	s.sweepGone()                       // sessions left working while no relay ran
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// Listener wraps ln with the connection caps of s.Limits: a connection
// over the cap for its address is answered 429, one over the total cap
// 503, and closed, before any request is read.
func (s *Server) Listener(ln net.Listener) net.Listener {
	l := s.Limits.withDefaults()
	return &capListener{Listener: ln, max: l.MaxConns, perAddr: l.MaxConnsPerAddr, byAddr: map[string]int{}, log: s.log,
		refusers: make(chan struct{}, maxRefusing)}
}

type capListener struct {
	net.Listener
	max, perAddr int
	log          *slog.Logger

	refusers chan struct{} // refusals under way (each at most 3 refuseTimeouts)
	wg       sync.WaitGroup

	mu       sync.Mutex
	total    int
	byAddr   map[string]int
	refused  int // since the last warning
	lastWarn time.Time
}

// Accept returns the next connection within the caps, refusing the others.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := addrKey(c.RemoteAddr().String())
		status, why := l.admit(key)
		if status == 0 {
			return &cappedConn{Conn: c, l: l, key: key}, nil
		}
		select {
		case l.refusers <- struct{}{}:
			l.wg.Go(func() { defer func() { <-l.refusers }(); refuse(c, status, why, true) })
		default:
			refuse(c, status, why, false)
		}
	}
}

// Close stops accepting and waits for the refusals under way.
func (l *capListener) Close() error {
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// admit counts a connection from key in, or says why not (an HTTP status).
func (l *capListener) admit(key string) (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	status, why := 0, ""
	switch {
	case l.byAddr[key] >= l.perAddr:
		status, why = http.StatusTooManyRequests, fmt.Sprintf("too many connections from this address (%d)", l.perAddr)
	case l.total >= l.max:
		status, why = http.StatusServiceUnavailable, fmt.Sprintf("too many connections (%d)", l.max)
	default:
		l.total++
		l.byAddr[key]++
		return 0, ""
	}
	l.refused++
	if now := time.Now(); now.Sub(l.lastWarn) >= 10*time.Second {
		l.log.Warn("connections refused", "addr", key, "why", why, "refused", l.refused)
		l.lastWarn, l.refused = now, 0
	}
	return status, why
}

func (l *capListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
}

// refuse answers a connection over a cap with a bare HTTP response and
// closes it. It reads the request first (for at most refuseTimeout): an
// HTTP client may discard a response that comes before its request, and
// closing with unread bytes resets the connection, which may lose the
// response. Unless polite, it only closes the connection.
func refuse(c net.Conn, status int, why string, polite bool) {
	defer c.Close()
	if !polite {
		return
	}
	c.SetReadDeadline(time.Now().Add(refuseTimeout))
	br := bufio.NewReaderSize(io.LimitReader(c, maxHeaderBytes), 4<<10)
	if req, err := http.ReadRequest(br); err == nil {
		req.Body.Close()
	}
	body := why + "\n"
	c.SetWriteDeadline(time.Now().Add(refuseTimeout))
	_, err := fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 10\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(refuseTimeout))
	io.Copy(io.Discard, io.LimitReader(c, maxHeaderBytes))
}

// cappedConn gives its place back to the caps when closed.
type cappedConn struct {
	net.Conn
	l    *capListener
	key  string
	once sync.Once
}

func (c *cappedConn) Close() error {
	c.once.Do(func() { c.l.release(c.key) })
	return c.Conn.Close()
}

// loginLimiter counts failed logins per address in fixed windows.
type loginLimiter struct {
	mu    sync.Mutex
	fails map[string]*loginFailures
}

type loginFailures struct {
	n     int
	since time.Time // start of the window
}

// overflowKey is the shared count of addresses beyond maxLoginAddrs.
const overflowKey = "(other addresses)"

// current returns key's count in the window that holds now (nil if none).
// The caller holds ll.mu.
func (ll *loginLimiter) current(key string, now time.Time, window time.Duration) *loginFailures {
	f := ll.fails[key]
	if f != nil && now.Sub(f.since) >= window {
		delete(ll.fails, key)
		return nil
	}
	return f
}

// blocked says whether key reached the limit in the current window, and
// when that window ends.
func (ll *loginLimiter) blocked(key string, now time.Time, l Limits) (time.Time, bool) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if _, ok := ll.fails[key]; !ok && len(ll.fails) >= maxLoginAddrs {
		key = overflowKey
	}
	f := ll.current(key, now, l.LoginWindow)
	if f == nil || f.n < l.LoginFailures {
		return time.Time{}, false
	}
	return f.since.Add(l.LoginWindow), true
}

// failed counts a failed login from key and returns the count in the
// current window.
func (ll *loginLimiter) failed(key string, now time.Time, l Limits) int {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.fails == nil {
		ll.fails = map[string]*loginFailures{}
	}
	if _, ok := ll.fails[key]; !ok && len(ll.fails) >= maxLoginAddrs {
		for k := range ll.fails { // drop the windows that ended
			ll.current(k, now, l.LoginWindow)
		}
		if len(ll.fails) >= maxLoginAddrs {
			key = overflowKey
		}
	}
	f := ll.current(key, now, l.LoginWindow)
	if f == nil {
		f = &loginFailures{since: now}
		ll.fails[key] = f
	}
	f.n++
	return f.n
}

// keepAlive pings c every PingInterval until stopped, and closes c when a
// pong does not come within PingTimeout: the peer is gone (a phone that
// lost its network leaves a half-open connection that would otherwise last
// until a write fails). Pongs are read by the connection's reader, which
// every endpoint runs for as long as the connection is open. It runs on a
// timer, not on a goroutine of its own, so an idle connection pays no stack
// for it. stop ends it and waits for a ping under way (cancel ctx first to
// end that ping at once).
func (s *Server) keepAlive(ctx context.Context, c *websocket.Conn, remote, endpoint string) (stop func()) {
	l := s.Limits.withDefaults()
	return every(l.PingInterval, func() bool {
		pctx, cancel := context.WithTimeout(ctx, l.PingTimeout)
		err := c.Ping(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
		case err == nil:
			s.pongs.Add(1)
			return true
		case timedOut:
			s.log.Info("connection closed: no pong", "addr", remote, "endpoint", endpoint, "timeout", l.PingTimeout)
			c.CloseNow()
		default: // the connection ended
		}
		return false
	})
}

// every runs f once interval has passed, and again an interval after
// each run that returns true, until stop. It runs on a timer, not on a
// goroutine of its own, so an idle connection pays no stack for it. stop
// prevents further runs and waits for one under way (end what it waits
// on first, to end it at once).
func every(interval time.Duration, f func() bool) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		running sync.WaitGroup
		t       *time.Timer
	)
	run := func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		running.Add(1)
		mu.Unlock()
		defer running.Done()
		if !f() {
			return
		}
		mu.Lock()
		if !stopped {
			t.Reset(interval)
		}
		mu.Unlock()
	}
	mu.Lock()
	t = time.AfterFunc(interval, run)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		running.Wait()
	}
}
