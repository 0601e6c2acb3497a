package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// serveLimited serves a relay with lim on 127.0.0.1 the way `ccrelay serve`
// does (HTTPServer on Listener) and returns it and its address.
func serveLimited(t *testing.T, lim Limits, log *slog.Logger) (*Server, string) {
	t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	s := NewServer(st, log, testToken)
	s.Limits = lim
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base, stop := context.WithCancel(context.Background())
	srv := s.HTTPServer(base)
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(s.Listener(ln)) }()
	t.Cleanup(func() {
		stop()
		srv.Close()
		<-served
		s.Wait()
	})
	return s, ln.Addr().String()
}

// rawGet sends one GET on c (keep-alive) and returns the response's status.
func rawGet(t *testing.T, c net.Conn, br *bufio.Reader, path, token string) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", path, auth); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Connections over the cap for one address are answered 429, over the
// total cap 503; a closed connection gives its place back.
func TestConnectionCaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  Limits
		open int // connections that fit
		want int
	}{
		{"per address", Limits{MaxConnsPerAddr: 2, MaxConns: 10}, 2, http.StatusTooManyRequests},
		{"in total", Limits{MaxConnsPerAddr: 10, MaxConns: 3}, 3, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := serveLimited(t, tc.lim, nil)
			var open []net.Conn
			for range tc.open {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				// Authenticated or not, an open connection takes a place.
				if got := rawGet(t, c, bufio.NewReader(c), "/health", ""); got != http.StatusUnauthorized {
					t.Fatalf("status %d", got)
				}
				open = append(open, c)
			}
			// One more: refused, with the status and closed.
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			if got := rawGet(t, c, br, "/health", testToken); got != tc.want {
				t.Fatalf("over the cap: status %d, want %d", got, tc.want)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("refused connection not closed: %v", err)
			}
			// Closing one makes room (once the relay sees it closed).
			open[0].Close()
			deadline := time.Now().Add(10 * time.Second)
			for {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				got := rawGet(t, c, bufio.NewReader(c), "/health", testToken)
				c.Close()
				if got == http.StatusOK {
					break
				}
				if got != tc.want || time.Now().After(deadline) {
					t.Fatalf("after a close: status %d", got)
				}
			}
		})
	}
}

// A client over a cap that sends nothing is answered after refuseTimeout;
// beyond maxRefusing answers under way, clients over a cap are closed
// unanswered.
func TestRefusals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	s := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	s.Limits = Limits{MaxConns: 1, MaxConnsPerAddr: 1}
	cl := s.Listener(ln).(*capListener)
	accepted := make(chan net.Conn, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := cl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	})
	defer func() {
		cl.Close()
		wg.Wait()
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	}()
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	<-accepted
	answer := func(send bool) string {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if send {
			fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: relay\r\n\r\n")
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		return string(b)
	}
	start := time.Now()
	if got := answer(false); !strings.HasPrefix(got, "HTTP/1.1 429 ") {
		t.Fatalf("silent client: %q", got)
	}
	if took := time.Since(start); took < refuseTimeout || took > refuseTimeout+5*time.Second {
		t.Fatalf("silent client answered after %v", took)
	}
	for range maxRefusing {
		cl.refusers <- struct{}{}
	}
	if got := answer(true); got != "" {
		t.Fatalf("with %d answers under way: %q", maxRefusing, got)
	}
	for range maxRefusing {
		<-cl.refusers
	}
	if got := answer(true); !strings.HasPrefix(got, "HTTP/1.1 429 ") {
		t.Fatalf("after: %q", got)
	}
}

// HTTPServer carries the limits' timeouts (the defaults for zero fields).
func TestHTTPServerSettings(t *testing.T) {
	for _, tc := range []struct {
		lim  Limits
		want [4]time.Duration // read header, read, write, idle
	}{
		{Limits{}, [4]time.Duration{DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultWriteTimeout, DefaultIdleTimeout}},
		{Limits{ReadHeaderTimeout: 1, ReadTimeout: 2, WriteTimeout: 3, IdleTimeout: 4}, [4]time.Duration{1, 2, 3, 4}},
	} {
		s := NewServer(nil, nil)
		s.Limits = tc.lim
		srv := s.HTTPServer(context.Background())
		if got := [4]time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout}; got != tc.want || srv.MaxHeaderBytes != maxHeaderBytes {
			t.Errorf("%+v: %v, %d header bytes", tc.lim, got, srv.MaxHeaderBytes)
		}
	}
}

// A request whose body does not come is closed after ReadTimeout, even if
// the other timeouts are long.
func TestReadTimeout(t *testing.T) {
	_, addr := serveLimited(t, Limits{ReadTimeout: 100 * time.Millisecond, ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour}, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("still open after 5 s")
	}
}

// Request headers over maxHeaderBytes are refused.
func TestHeaderLimit(t *testing.T) {
	_, addr := serveLimited(t, Limits{}, nil)
	for _, tc := range []struct {
		size int
		want int
	}{{maxHeaderBytes / 2, http.StatusOK}, {2 * maxHeaderBytes, http.StatusRequestHeaderFieldsTooLarge}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/health", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("X-Padding", strings.Repeat("p", tc.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d bytes of headers: status %d, want %d", tc.size, resp.StatusCode, tc.want)
		}
	}
}

// Idle connections, authenticated or not, are closed after the timeouts.
func TestIdleConnectionsClosed(t *testing.T) {
	_, addr := serveLimited(t, Limits{ReadHeaderTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond}, nil)
	for _, tc := range []struct {
		name  string
		token string
		ask   bool
	}{
		{"nothing sent", "", false},
		{"keep-alive after a refused login", "", true},
		{"keep-alive after a request", testToken, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			if tc.ask {
				rawGet(t, c, br, "/health", tc.token)
			}
			start := time.Now()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = br.ReadByte()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("still open after %v", time.Since(start))
			}
			if err == nil {
				t.Fatal("the relay sent something")
			}
		})
	}
}

// The HTTP timeouts do not end websockets: one outlives all of them
// several times over, and still works.
func TestWebsocketOutlivesHTTPTimeouts(t *testing.T) {
	short := 50 * time.Millisecond
	s, addr := serveLimited(t, Limits{ReadHeaderTimeout: short, ReadTimeout: short, WriteTimeout: short, IdleTimeout: short,
		PingInterval: short, PingTimeout: 5 * time.Second}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	frames := readInto(ctx, c)
	waitFor(t, "10 pongs", func() bool { return s.pongs.Load() >= 10 })
	send(t, c, protocol.Frame{Type: protocol.FrameList})
	select {
	case f := <-frames:
		if f.Type != protocol.FrameSessions {
			t.Fatalf("got %s", f.Type)
		}
	case <-ctx.Done():
		t.Fatal("no answer")
	}
}

// readInto reads c until it ends (which also answers pings) and sends the
// frames on the returned channel.
func readInto(ctx context.Context, c *websocket.Conn) <-chan protocol.Frame {
	out := make(chan protocol.Frame, 16)
	go func() {
		defer close(out)
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var f protocol.Frame
			if err := json.Unmarshal(b, &f); err == nil {
				out <- f
			}
		}
	}()
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// freezeProxy forwards one TCP connection to target until frozen; then it
// drops what either side sends, as a network that lost the peer would.
type freezeProxy struct {
	addr   string
	frozen atomic.Bool
	closed chan struct{} // the target closed its side
}

func startFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{addr: ln.Addr().String(), closed: make(chan struct{})}
	var wg sync.WaitGroup
	conns := make(chan net.Conn, 2)
	wg.Go(func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		conns <- c
		conns <- u
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if err != nil {
					return
				}
				if !p.frozen.Load() {
					dst.Write(buf[:n])
				}
			}
		}
		wg.Go(func() { pipe(c, u); close(p.closed) })
		pipe(u, c)
	})
	t.Cleanup(func() {
		ln.Close()
		close(conns)
		for c := range conns {
			c.Close()
		}
		wg.Wait()
	})
	return p
}

// A peer that stops answering pings is dropped within PingInterval +
// PingTimeout; one that answers stays (TestWebsocketOutlivesHTTPTimeouts).
func TestUnansweredPingsCloseConnection(t *testing.T) {
	interval, timeout := 50*time.Millisecond, 200*time.Millisecond
	for _, endpoint := range []string{"/ws/app", "/ws/cli"} {
		t.Run(endpoint, func(t *testing.T) {
			_, addr := serveLimited(t, Limits{PingInterval: interval, PingTimeout: timeout}, nil)
			p := startFreezeProxy(t, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, _, err := websocket.Dial(ctx, "ws://"+p.addr+endpoint, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			readInto(ctx, c)
			p.frozen.Store(true)
			start := time.Now()
			select {
			case <-p.closed:
				t.Logf("dropped after %v", time.Since(start))
			case <-time.After(interval + timeout + 3*time.Second):
				t.Fatal("the relay kept a connection that does not answer pings")
			}
		})
	}
}

// syncBuffer is a log destination safe for the handlers' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Failed logins are logged with address and endpoint, never the token; an
// address with LoginFailures of them in the window gets 429 even with the
// right token, until the window ends.
func TestFailedLoginsLoggedAndLimited(t *testing.T) {
	var logs syncBuffer
	s, addr := serveLimited(t, Limits{LoginFailures: 3, LoginWindow: time.Minute}, slog.New(slog.NewTextHandler(&logs, nil)))
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	const wrong = "QZXQXZZQXQZZXXQZ"
	get := func(path string, mod func(*http.Request)) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		mod(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	for i, tc := range []struct {
		path string
		mod  func(*http.Request)
		why  string
	}{
		{"/ws/cli", bearer(wrong), "unknown token"},
		{"/health", func(*http.Request) {}, "no token"},
		{"/ws/app", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Protocol", tokenProtocolPrefix+wrong) }, "unknown token"},
	} {
		if got, _ := get(tc.path, tc.mod); got != http.StatusUnauthorized {
			t.Fatalf("attempt %d: status %d", i, got)
		}
		line := fmt.Sprintf("endpoint=%s reason=%q failures=%d", tc.path, tc.why, i+1)
		if !strings.Contains(logs.String(), line) {
			t.Fatalf("no log line with %s:\n%s", line, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "addr=127.0.0.1:") {
		t.Fatalf("address not logged:\n%s", logs.String())
	}
	for i := 0; i+4 <= len(wrong); i++ {
		if strings.Contains(logs.String(), wrong[i:i+4]) {
			t.Fatalf("the log holds part of the offered token (%q):\n%s", wrong[i:i+4], logs.String())
		}
	}
	// Limited: the right token is not even looked at.
	if got, retry := get("/health", bearer(testToken)); got != http.StatusTooManyRequests || retry != "60" {
		t.Fatalf("after 3 failures: status %d, Retry-After %q", got, retry)
	}
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	if got, retry := get("/ws/cli", bearer(testToken)); got != http.StatusTooManyRequests || retry != "30" {
		t.Fatalf("30 s later: status %d, Retry-After %q", got, retry)
	}
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	if got, _ := get("/health", bearer(testToken)); got != http.StatusOK {
		t.Fatalf("after the window: status %d", got)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the log holds the token")
	}
}

// The failed-login counts are bounded: beyond maxLoginAddrs addresses,
// new ones share one count (limited together); ended windows are dropped.
func TestLoginLimiterBounded(t *testing.T) {
	var ll loginLimiter
	lim := Limits{LoginFailures: 2, LoginWindow: time.Minute}
	now := time.Unix(1_700_000_000, 0)
	for i := range maxLoginAddrs {
		ll.failed(fmt.Sprint("10.0.", i/256, ".", i%256), now, lim)
	}
	ll.failed("192.0.2.1", now, lim)
	if n := ll.failed("192.0.2.2", now, lim); n != 2 {
		t.Fatalf("overflow count %d, want 2", n)
	}
	if _, blocked := ll.blocked("192.0.2.3", now, lim); !blocked {
		t.Fatal("a new address beyond the bound is not limited with the others")
	}
	if len(ll.fails) != maxLoginAddrs+1 {
		t.Fatalf("%d counts kept", len(ll.fails))
	}
	later := now.Add(time.Minute)
	if n := ll.failed("192.0.2.4", later, lim); n != 1 || len(ll.fails) != 1 {
		t.Fatalf("ended windows kept: count %d, %d kept", n, len(ll.fails))
	}
}

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":                 "127.0.0.1",
		"[::ffff:10.1.2.3]:80":           "10.1.2.3",
		"[2001:db8:1:2:3:4:5:6]:443":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":     "2001:db8:1:2::/64",
		"[fe80::1%eth0]:1":               "fe80::/64",
		"not an address":                 "not an address",
		"[2001:db8:1:3:3:4:5:6]:443":     "2001:db8:1:3::/64",
		"192.0.2.10:1":                   "192.0.2.10",
		"[::1]:8707":                     "::/64",
		"203.0.113.5:65535":              "203.0.113.5",
		"[2001:db8:ffff:ffff:1::]:65535": "2001:db8:ffff:ffff::/64",
	} {
		if got := addrKey(in); got != want {
			t.Errorf("addrKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// An app is dropped when subscriberSlack batches wait for it, not before;
// a lister likewise with session changes.
func TestSubscriberSlack(t *testing.T) {
	h := hub{subs: map[string]map[*subscriber]struct{}{}}
	sub := h.add("s", func() {})
	l := h.addLister("owner", func() {})
	isClosed := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for i := range subscriberSlack {
		h.publish("s", published{live: true, frame: []byte("{}")})
		h.sessionChanged(SessionInfo{ID: "s", Owner: "owner"})
		if isClosed(sub.dropped) || isClosed(l.dropped) {
			t.Fatalf("dropped after %d", i+1)
		}
	}
	h.publish("s", published{live: true, frame: []byte("{}")})
	h.sessionChanged(SessionInfo{ID: "s", Owner: "owner"})
	if !isClosed(sub.dropped) || !isClosed(l.dropped) {
		t.Fatalf("not dropped after %d", subscriberSlack+1)
	}
}

// A fork's parent travels in lists when it is a session id; anything else
// in its place is dropped.
func TestSummaryInfoForkedFrom(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	for _, tc := range []struct{ in, want string }{
		{`{"forkedFrom":"` + id + `"}`, id},
		{`{"forkedFrom":"javascript:alert(1)"}`, ""},
		{`{"forkedFrom":7}`, ""},
		{`{}`, ""},
	} {
		var got struct {
			ForkedFrom string `json:"forkedFrom"`
		}
		if err := json.Unmarshal(summaryInfo(json.RawMessage(tc.in)), &got); err != nil || got.ForkedFrom != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.in, got.ForkedFrom, err, tc.want)
		}
	}
}

// A recording (ccrelay demo) travels in lists as "recording": true; any
// other value in its place is dropped, and an info without it (from an
// older CLI) has none.
func TestSummaryInfoRecording(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"recording":true}`, true},
		{`{"recording":false}`, false},
		{`{"recording":"true"}`, false},
		{`{"recording":1}`, false},
		{`{}`, false},
	} {
		out := summaryInfo(json.RawMessage(tc.in))
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		r, ok := got["recording"]
		if ok != tc.want || (ok && string(r) != "true") {
			t.Errorf("%s: summary %s, want recording %v", tc.in, out, tc.want)
		}
	}
}

// The rate limit travels in lists, bounded.
func TestSummaryInfoRateLimit(t *testing.T) {
	in := `{"rateLimit":{"status":"allowed_warning","resetsAt":1795478400,"rateLimitType":"five_hour","utilization":0.8,"extra":"` + strings.Repeat("x", 10000) + `"}}`
	out := summaryInfo(json.RawMessage(in))
	var got struct {
		RateLimit map[string]any `json:"rateLimit"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.RateLimit["status"] != "allowed_warning" || got.RateLimit["rateLimitType"] != "five_hour" || got.RateLimit["extra"] != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(out) > 300 {
		t.Fatalf("%d bytes", len(out))
	}
}

func TestSummaryInfoTurnCosts(t *testing.T) {
	var costs []string
	for i := range 70 {
		costs = append(costs, fmt.Sprintf(`{"turn":%q,"usd":%g}`, protocol.DeriveID("t", fmt.Sprint(i)), float64(i)/1000))
	}
	costs = append(costs, `{"turn":"Not-A-Cuid","usd":1}`, `{"turn":"cabc","usd":-1}`)
	out := summaryInfo(json.RawMessage(`{"turnCosts":[` + strings.Join(costs, ",") + `]}`))
	var got struct {
		TurnCosts []struct {
			Turn string  `json:"turn"`
			USD  float64 `json:"usd"`
		} `json:"turnCosts"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	// The last 64 of the 72 are looked at; the two bad ones are dropped.
	if len(got.TurnCosts) != summaryTurnCosts-2 || got.TurnCosts[0].Turn != protocol.DeriveID("t", "8") || got.TurnCosts[0].USD != 0.008 {
		t.Fatalf("%d turn costs, first %+v", len(got.TurnCosts), got.TurnCosts[0])
	}
}
