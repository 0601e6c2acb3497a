package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
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

	store          *Store
	tokens         map[string]string // bootstrap token -> account id
	defaultAccount string
	log            *slog.Logger
	pairing        *pairing

	// Transport: see tls.go.
	Transport Transport

	touchMu sync.Mutex
	touched map[string]touch // credential id -> when its last use was recorded

	liveMu sync.Mutex
	live   map[string]map[*liveConn]struct{} // credential id -> its open websockets

	logins loginLimiter
	now    func() time.Time // the clock of the login limits (tests replace it)
	pongs  atomic.Int64     // pings answered, over all connections

	hub   hub
	conns sync.WaitGroup // open websocket connections
	dp    dataPath       // counters (Stats)

	routes // command routing (commands.go)

	push pushState // notifications (push.go)

	fan *fanout // the other relays on the same PostgreSQL database (fanout.go); nil on SQLite

	metrics metrics // Prometheus metrics (metrics.go)
}

// Wait blocks until every websocket connection has ended. Cancel the
// requests' base context first (http.Server.BaseContext) to end them.
func (s *Server) Wait() { s.conns.Wait() }

// NewServer returns a relay over store that accepts the given bootstrap
// tokens (the relay's token file): see New. An error setting up the
// accounts is logged; the tokens then keep the sessions they had.
func NewServer(store *Store, log *slog.Logger, tokens ...string) *Server {
	s, err := New(context.Background(), store, log, tokens...)
	if err != nil {
		s.log.Error("accounts", "err", err)
	}
	return s
}

// New returns a relay over store. Machines and devices authenticate with
// their own credentials (accounts.go); tokens are bootstrap tokens, each
// a machine and a device at once, accepted only on a loopback connection
// that came through no proxy. The first token belongs to the default
// account (which takes over the sessions the token had before accounts
// existed); each further token is an account of its own.
func New(ctx context.Context, store *Store, log *slog.Logger, tokens ...string) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{store: store, tokens: map[string]string{}, log: log, now: time.Now, hub: hub{subs: map[string]map[*subscriber]struct{}{}},
		routes: newRoutes(),
		live:   map[string]map[*liveConn]struct{}{}, touched: map[string]touch{}}
	s.pairing = newPairing(store, func() time.Time { return s.now() })
	if store == nil {
		return s, nil
	}
	if store.w.d == postgresSQL {
		s.fan = &fanout{node: newNodeID(), url: store.url, connected: make(chan struct{})}
	}
	var errs []error
	first := true
	for _, t := range tokens {
		if t == "" {
			continue
		}
		legacy := OwnerID(t)
		s.tokens[t] = legacy
		if first {
			first = false
			def, err := store.DefaultAccount(ctx, legacy)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if n, err := store.AdoptSessions(ctx, legacy, def); err != nil {
				errs = append(errs, err)
			} else if n > 0 {
				log.Info("sessions of the relay token moved to the default account", "sessions", n)
			}
			s.tokens[t], s.defaultAccount = def, def
			continue
		}
		if err := store.EnsureAccount(ctx, legacy, "token "+legacy); err != nil {
			errs = append(errs, err)
		}
	}
	if s.defaultAccount == "" {
		def, err := store.DefaultAccount(ctx, "")
		if err != nil {
			errs = append(errs, err)
		}
		s.defaultAccount = def
	}
	return s, errors.Join(errs...)
}

// OwnerID is the id under which a token's sessions were stored before
// accounts (a hash, so the database does not hold the token); a further
// token of the token file is still the account of that id.
func OwnerID(token string) string {
	sum := sha256.Sum256([]byte("ccrelay-owner:" + token))
	return hex.EncodeToString(sum[:8])
}

type ownerKey struct{}

// ownerFrom is the account of the request: the owner of the sessions it
// may see and steer.
func ownerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// principal is who made a request: an account and a role, and for a
// machine or a device its credential.
type principal struct {
	account string
	role    string
	cred    Credential // zero for a bootstrap token
}

type principalKey struct{}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// Handler serves the relay's endpoints, which all need a credential, and
// the web app's static files at "/", which hold no secret and need none.
// Each endpoint admits some roles: a machine only /ws/cli, a device only
// /ws/app and /status (and both their own /api/me).
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"ok":true}`)
	})
	api.Handle("GET /ws/cli", s.only(http.HandlerFunc(s.serveCLI), RoleMachine))
	api.Handle("GET /ws/app", s.only(http.HandlerFunc(s.serveApp), RoleDevice))
	authed := s.auth(api)
	app := web.Handler()
	mux := http.NewServeMux()
	mux.Handle("/health", authed)
	mux.Handle("/ws/", authed)
	mux.Handle("GET /status", s.auth(s.only(http.HandlerFunc(s.serveStatus), RoleDevice)))
	// Liveness and readiness for orchestrators: no token, no content.
	mux.HandleFunc("GET /healthz", serveHealthz)
	mux.HandleFunc("GET /readyz", s.serveReadyz)
	// Listing and deleting sessions: the app (a device) and ccrelay
	// sessions (a machine) alike, within the credential's account.
	mux.Handle("GET /sessions", s.auth(s.only(http.HandlerFunc(s.serveSessions), RoleDevice, RoleMachine)))
	mux.Handle("DELETE /sessions/{id}", s.auth(s.only(http.HandlerFunc(s.serveDelete), RoleDevice, RoleMachine)))
	mux.Handle("/push/", s.auth(s.only(http.HandlerFunc(s.servePush), RoleDevice)))
	s.accountRoutes(mux)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		app.ServeHTTP(w, r)
	}))
	return s.transport(mux)
}

// only admits the roles given (and bootstrap tokens) to next; others get
// 403 with what their role may do.
func (s *Server) only(next http.Handler, roles ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r.Context())
		if p.role == RoleBootstrap || slices.Contains(roles, p.role) {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Warn("role refused", "addr", s.clientAddr(r), "endpoint", endpointName(r.URL.Path), "role", p.role, "name", p.cred.Name)
		msg := "a " + p.role + " credential may not use " + endpointName(r.URL.Path)
		switch p.role {
		case RoleDevice:
			msg += ": a device (an app) reads and sends commands; only a machine (a CLI) writes envelopes"
		case RoleMachine:
			msg += ": a machine (a CLI) writes envelopes; only a device (an app) reads sessions and sends commands"
		}
		http.Error(w, msg, http.StatusForbidden)
	})
}

// auth refuses, before any handler runs, a request without a credential in
// the Authorization header or (websockets from a browser) the token
// subprotocol. Each refusal is logged (address and endpoint, never what was
// offered as a credential); an address with LoginFailures refusals in a
// LoginWindow is answered 429, without its credential being looked at,
// until the window ends.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := s.Limits.withDefaults()
		key, now := addrKey(s.clientAddr(r)), s.now()
		if until, blocked := s.logins.blocked(key, now, l); blocked {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(until.Sub(now).Seconds()))))
			http.Error(w, "too many failed logins from this address; try again later", http.StatusTooManyRequests)
			return
		}
		p, reason, err := s.authorized(r)
		if err != nil {
			s.log.Error("login", "addr", s.clientAddr(r), "err", err)
			http.Error(w, "the relay could not check the credential", http.StatusInternalServerError)
			return
		}
		if reason != "" {
			n := s.logins.failed(key, now, l)
			args := []any{"addr", s.clientAddr(r), "endpoint", endpointName(r.URL.Path), "reason", reason, "failures", n}
			if n >= l.LoginFailures {
				s.log.Warn("login failed; further logins from this address refused", append(args, "for", l.LoginWindow)...)
			} else {
				s.log.Warn("login failed", args...)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="ccrelay"`)
			msg := "unauthorized"
			if reason == reasonRemoteBootstrap {
				msg = "unauthorized: the relay's token works only on this machine (127.0.0.1); pair this device (ccrelay pair) or log this machine in (ccrelay login)"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		if p.cred.ID != "" {
			s.touch(r.Context(), p.cred, s.clientAddr(r))
		}
		ctx := context.WithValue(r.Context(), ownerKey{}, p.account)
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, principalKey{}, p)))
	})
}

const reasonRemoteBootstrap = "relay token from another machine"

// authorized finds who offered the request's credential (header or
// subprotocol): a machine or a device by its hash in the store, or a
// bootstrap token (compared in constant time). It returns why not
// ("" when found) without saying what was offered.
func (s *Server) authorized(r *http.Request) (principal, string, error) {
	candidates := []string{strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}
	for _, p := range websocketProtocols(r) {
		if t, ok := strings.CutPrefix(p, tokenProtocolPrefix); ok {
			candidates = append(candidates, t)
		}
	}
	reason := "no token"
	for _, c := range candidates {
		if c == "" {
			continue
		}
		reason = "unknown token"
		if strings.HasPrefix(c, credentialPrefix) {
			cred, err := s.store.CredentialBySecret(r.Context(), c)
			if errors.Is(err, ErrNoCredential) {
				continue
			}
			if err != nil {
				return principal{}, "", err
			}
			return principal{account: cred.Account, role: cred.Role, cred: cred}, "", nil
		}
		account, found := "", false
		for t, a := range s.tokens {
			if subtle.ConstantTimeCompare([]byte(c), []byte(t)) == 1 {
				account, found = a, true
			}
		}
		if found {
			if !s.directLoopback(r) {
				return principal{}, reasonRemoteBootstrap, nil
			}
			return principal{account: account, role: RoleBootstrap}, "", nil
		}
	}
	return principal{}, reason, nil
}

// touch records a credential's last use, at most every lastSeenEvery (and
// when its address changes).
func (s *Server) touch(ctx context.Context, c Credential, addr string) {
	now := s.now()
	s.touchMu.Lock()
	last, ok := s.touched[c.ID]
	fresh := ok && last.addr == addr && now.Sub(last.at) < lastSeenEvery
	if !fresh {
		s.touched[c.ID] = touch{at: now, addr: addr}
	}
	s.touchMu.Unlock()
	if fresh {
		return
	}
	if err := s.store.TouchCredential(ctx, c.ID, addr, now); err != nil {
		s.log.Warn("last seen", "err", err)
	}
}

type touch struct {
	at   time.Time
	addr string
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
	lc := s.track(principalFrom(r.Context()).cred.ID, c)
	return c, func() {
		s.forget(lc)
		cancel()
		stopPings()
		c.CloseNow()
		lc.closing.Wait()
		s.conns.Done()
	}, nil
}

// liveConn is an open websocket of a credential, which revoking closes.
type liveConn struct {
	id      string
	c       *websocket.Conn
	closing sync.WaitGroup // the closing handshake started by a revocation
	revoked bool           // under Server.liveMu
	gone    bool           // under Server.liveMu: the connection ended
}

// track remembers c as an open websocket of the credential id (none for a
// bootstrap token), for closeCredential to close.
func (s *Server) track(id string, c *websocket.Conn) *liveConn {
	lc := &liveConn{id: id, c: c}
	if id == "" {
		return lc
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live[id] == nil {
		s.live[id] = map[*liveConn]struct{}{}
	}
	s.live[id][lc] = struct{}{}
	return lc
}

// forget: lc's connection ended; no closing handshake starts after this.
func (s *Server) forget(lc *liveConn) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	lc.gone = true
	delete(s.live[lc.id], lc)
	if len(s.live[lc.id]) == 0 {
		delete(s.live, lc.id)
	}
}

// StatusRevoked is the close code of a websocket whose credential was
// revoked (or signed out): its holder must not reconnect with it.
const StatusRevoked websocket.StatusCode = 4001

// closeCredential starts closing every open websocket of credential id,
// telling the peer why (StatusRevoked), and returns how many. Each
// closing handshake belongs to its connection, which waits for it to end
// (the library bounds it to 5 s) before it counts as closed.
func (s *Server) closeCredential(id, why string) int {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	n := 0
	for lc := range s.live[id] {
		if lc.gone || lc.revoked {
			continue
		}
		lc.revoked = true
		n++
		lc.closing.Go(func() { lc.c.Close(StatusRevoked, why) })
	}
	return n
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
	if s.fromProxy(r) { // the Origin was checked against the forwarded host (transport)
		opts.OriginPatterns = []string{s.requestHost(r)}
	}
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
