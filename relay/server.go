package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

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

	gone gone // sessions whose CLI connection ended (gone.go)

	metrics metrics // Prometheus metrics (metrics.go)

	historyHook func() // called as each read of history starts (tests); nil
}

// Wait blocks until every websocket connection has ended. Cancel the
// requests' base context first (http.Server.BaseContext) to end them.
// Served through HTTPServer, it also waits for the watchers of sessions
// whose CLI left (gone.go), which that base context ends.
func (s *Server) Wait() {
	s.conns.Wait()
	if b := s.gone.base; b != nil && b.Err() != nil {
		s.stopGone()
		s.gone.wg.Wait()
	}
}

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
