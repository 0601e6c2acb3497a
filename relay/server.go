package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/web"
)

// Limits of the wire protocol.
const (
	MaxFrameBytes = 8 << 20 // a larger frame is refused with an error frame naming it (CLI endpoint) or closes the connection (1009, app endpoint)
	// MaxDiscardFrameBytes: a CLI's frame over MaxFrameBytes is read on
	// (and thrown away, never held) up to this size so that the relay can
	// answer it with an error frame and keep the connection; beyond it the
	// connection is closed (1009).
	MaxDiscardFrameBytes = 64 << 20
	maxBatch             = 1000 // envelopes in one FrameEnvelopes
	historyPage          = 500
	subscriberSlack      = 256 // live batches (and session changes) buffered per app before it is dropped; each buffer is allocated whole, so it is most of an idle app's cost
)

// tokenProtocolPrefix: browsers cannot set headers on a websocket, so apps
// send the token as a subprotocol "ccrelay-token.<token>" (never in the URL).
const tokenProtocolPrefix = "ccrelay-token."

// Server is the relay: CLIs send envelopes, apps subscribe to sessions.
type Server struct {
	// Limits bound connections, their timeouts, pings and failed logins
	// (zero fields: the defaults). Set them before serving.
	Limits Limits

	store  *Store
	tokens map[string]string // token -> owner id
	log    *slog.Logger

	logins loginLimiter
	now    func() time.Time // the clock of the login limits (tests replace it)
	pongs  atomic.Int64     // pings answered, over all connections

	hub   hub
	conns sync.WaitGroup // open websocket connections
	dp    dataPath       // counters (Stats)

	routes // command routing (commands.go)
}

// Wait blocks until every websocket connection has ended. Cancel the
// requests' base context first (http.Server.BaseContext) to end them.
func (s *Server) Wait() { s.conns.Wait() }

// NewServer returns a relay over store that accepts the given tokens. Each
// token sees and steers only the sessions its CLIs created.
func NewServer(store *Store, log *slog.Logger, tokens ...string) *Server {
	if log == nil {
		log = slog.Default()
	}
	ts := map[string]string{}
	for _, t := range tokens {
		if t != "" {
			ts[t] = OwnerID(t)
		}
	}
	return &Server{store: store, tokens: ts, log: log, now: time.Now, hub: hub{subs: map[string]map[*subscriber]struct{}{}},
		routes: newRoutes()}
}

// OwnerID is the id under which a token's sessions are stored (a hash, so
// the database does not hold the token).
func OwnerID(token string) string {
	sum := sha256.Sum256([]byte("ccrelay-owner:" + token))
	return hex.EncodeToString(sum[:8])
}

type ownerKey struct{}

func ownerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// Handler serves the relay's endpoints, which all need the token, and the
// web app's static files at "/", which hold no secret and need none (the
// app reads the token from its URL fragment).
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"ok":true}`)
	})
	api.HandleFunc("GET /ws/cli", s.serveCLI)
	api.HandleFunc("GET /ws/app", s.serveApp)
	authed := s.auth(api)
	app := web.Handler()
	mux := http.NewServeMux()
	mux.Handle("/health", authed)
	mux.Handle("/ws/", authed)
	mux.Handle("GET /status", s.auth(http.HandlerFunc(s.serveStatus)))
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		app.ServeHTTP(w, r)
	}))
	return mux
}

// auth refuses, before any handler runs, a request without the token in the
// Authorization header or (websockets from a browser) the token subprotocol.
// Each refusal is logged (address and endpoint, never what was offered as a
// token); an address with LoginFailures refusals in a LoginWindow is
// answered 429, without its token being looked at, until the window ends.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := s.Limits.withDefaults()
		key, now := addrKey(r.RemoteAddr), s.now()
		if until, blocked := s.logins.blocked(key, now, l); blocked {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(until.Sub(now).Seconds()))))
			http.Error(w, "too many failed logins from this address; try again later", http.StatusTooManyRequests)
			return
		}
		owner, ok := s.authorized(r)
		if !ok {
			n := s.logins.failed(key, now, l)
			args := []any{"addr", r.RemoteAddr, "endpoint", endpointName(r.URL.Path), "reason", refusalReason(r), "failures", n}
			if n >= l.LoginFailures {
				s.log.Warn("login failed; further logins from this address refused", append(args, "for", l.LoginWindow)...)
			} else {
				s.log.Warn("login failed", args...)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="ccrelay"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner)))
	})
}

// authorized finds the token of the request (header or subprotocol) among
// the relay's tokens, comparing in constant time, and returns its owner id.
func (s *Server) authorized(r *http.Request) (string, bool) {
	candidates := []string{strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}
	for _, p := range websocketProtocols(r) {
		if t, ok := strings.CutPrefix(p, tokenProtocolPrefix); ok {
			candidates = append(candidates, t)
		}
	}
	owner, found := "", false
	for _, c := range candidates {
		if c == "" {
			continue
		}
		for t, o := range s.tokens {
			if subtle.ConstantTimeCompare([]byte(c), []byte(t)) == 1 {
				owner, found = o, true
			}
		}
	}
	return owner, found
}

// endpointName is the path of a refused request as logged: one of the
// relay's endpoints, or "other" (a path is the client's to choose, and
// could hold anything).
func endpointName(path string) string {
	switch path {
	case "/health", "/ws/cli", "/ws/app":
		return path
	}
	return "other"
}

// refusalReason says why a request was refused, without what it offered.
func refusalReason(r *http.Request) string {
	if r.Header.Get("Authorization") != "" {
		return "unknown token"
	}
	for _, p := range websocketProtocols(r) {
		if strings.HasPrefix(p, tokenProtocolPrefix) {
			return "unknown token"
		}
	}
	return "no token"
}

func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}

// upgrade accepts a websocket and counts it as open until done is called.
// Until then the relay pings it (keepAlive).
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, mode websocket.CompressionMode) (*websocket.Conn, func(), error) {
	s.conns.Add(1)
	c, err := s.accept(w, r, mode)
	if err != nil {
		s.conns.Done()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(r.Context())
	stopPings := s.keepAlive(ctx, c, r.RemoteAddr, r.URL.Path)
	return c, func() { cancel(); stopPings(); c.CloseNow(); s.conns.Done() }, nil
}

// appCompression: apps (browsers, which always offer permessage-deflate)
// get compressed frames. Session JSON shrinks several times over, which
// makes a long history arrive much sooner on a phone's network (and even on
// loopback, in Chromium). CLIs do not ask for it and pay nothing.
//
// Each frame is compressed on its own (no context takeover): a connection
// that kept its compression context would hold a 1.2 MB compressor for as
// long as it is open, idle or not (TestIdleAppMemory); this way the
// compressor comes from a pool for one frame and goes back. History
// batches are large enough to compress well alone.
const appCompression = websocket.CompressionNoContextTakeover

func (s *Server) accept(w http.ResponseWriter, r *http.Request, mode websocket.CompressionMode) (*websocket.Conn, error) {
	opts := &websocket.AcceptOptions{CompressionMode: mode}
	for _, p := range websocketProtocols(r) {
		if strings.HasPrefix(p, tokenProtocolPrefix) {
			opts.Subprotocols = []string{p} // echo it, or browsers close
		}
	}
	c, err := websocket.Accept(w, r, opts)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(MaxFrameBytes)
	return c, nil
}

func writeFrame(ctx context.Context, c *websocket.Conn, f protocol.Frame) error {
	f.V = protocol.FrameVersion
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return writeRaw(ctx, c, b)
}

// readFrame reads one message, holding at most MaxFrameBytes+1 of it:
// the rest of a larger one is read and thrown away (as far as the
// connection's read limit lets), and size says how large it was.
func readFrame(ctx context.Context, c *websocket.Conn) (data []byte, size int64, err error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return nil, 0, err
	}
	data, err = io.ReadAll(io.LimitReader(r, MaxFrameBytes+1))
	if err != nil {
		return nil, 0, err
	}
	size = int64(len(data))
	if size > MaxFrameBytes {
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			return nil, 0, err
		}
		size += n
	}
	return data, size, nil
}

// refuseTooLarge answers a frame over MaxFrameBytes with the error code
// its type uses for a frame refused for what it is, and its ref, both read
// from the frame's head.
func refuseTooLarge(data []byte, size int64) *protocol.Frame {
	typ, ref := frameHead(data[:min(len(data), 4096)])
	e := errorFrame(refusalCode(typ), "the frame is %d bytes, more than the relay's limit of %d (relay.MaxFrameBytes); nothing of it was stored or forwarded", size, MaxFrameBytes)
	e.Ref = ref
	return &e
}

// frameHead reads the type and ref from the start of a frame's JSON (they
// come before its envelopes when a CLI encodes a protocol.Frame).
func frameHead(head []byte) (typ, ref string) {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "", ""
	}
	for typ == "" || ref == "" {
		k, err := d.Token()
		if err != nil {
			return typ, ref
		}
		key, _ := k.(string)
		v, err := d.Token()
		if err != nil {
			return typ, ref
		}
		if _, ok := v.(json.Delim); ok {
			return typ, ref // an array or object: the short fields are behind
		}
		switch s, _ := v.(string); key {
		case "type":
			typ = s
		case "ref":
			ref = s
		}
	}
	return typ, ref
}

func errorFrame(code, format string, args ...any) protocol.Frame {
	return protocol.Frame{Type: protocol.FrameError, Code: code, Message: fmt.Sprintf(format, args...)}
}

// readFrames calls handle for every frame read from c until the connection
// ends. A malformed frame gets an error frame and reading goes on.
func (s *Server) readFrames(ctx context.Context, c *websocket.Conn, handle func(protocol.Frame) error) error {
	for {
		data, size, err := readFrame(ctx, c)
		if err != nil {
			return err
		}
		if size > MaxFrameBytes {
			if werr := writeFrame(ctx, c, *refuseTooLarge(data, size)); werr != nil {
				return werr
			}
			continue
		}
		var f protocol.Frame
		if err := json.Unmarshal(data, &f); err != nil {
			if werr := writeFrame(ctx, c, errorFrame("bad-frame", "not a JSON frame: %v", err)); werr != nil {
				return werr
			}
			continue
		}
		if e := refuseInvalidUTF8(f, data); e != nil {
			if werr := writeFrame(ctx, c, *e); werr != nil {
				return werr
			}
			continue
		}
		if f.V != protocol.FrameVersion {
			if werr := writeFrame(ctx, c, errorFrame("bad-version", "frame version %d, this relay speaks %d", f.V, protocol.FrameVersion)); werr != nil {
				return werr
			}
			continue
		}
		if err := handle(f); err != nil {
			return err
		}
	}
}
