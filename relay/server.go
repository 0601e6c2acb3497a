package relay

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/web"
)

// Limits of the wire protocol.
const (
	MaxFrameBytes   = 8 << 20 // a frame larger than this closes the connection (1009)
	maxBatch        = 1000    // envelopes in one FrameEnvelopes
	historyPage     = 500
	subscriberSlack = 1024 // live batches buffered per app before it is dropped
)

// tokenProtocolPrefix: browsers cannot set headers on a websocket, so apps
// send the token as a subprotocol "ccrelay-token.<token>" (never in the URL).
const tokenProtocolPrefix = "ccrelay-token."

// Server is the relay: CLIs send envelopes, apps subscribe to sessions.
type Server struct {
	store  *Store
	tokens map[string]string // token -> owner id
	log    *slog.Logger

	appendMu sync.Mutex // appends and their publication happen in seq order
	hub      hub
	conns    sync.WaitGroup // open websocket connections

	cmdMu     sync.Mutex // command routing is one at a time: no double delivery
	peersMu   sync.Mutex
	owners    map[string]*peer    // session -> the CLI connection that owns it
	watchers  map[string]*peer    // command id -> the app connection that sent it
	delivered map[string]delivery // command id -> where it was delivered
}

// peer is one websocket connection, for writes from other goroutines.
type peer struct{ c *websocket.Conn }

// delivery is a command handed to a CLI and not answered yet.
type delivery struct {
	cli     *peer
	session string
}

func (p *peer) send(ctx context.Context, f protocol.Frame) error { return writeFrame(ctx, p.c, f) }

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
	return &Server{store: store, tokens: ts, log: log, hub: hub{subs: map[string]map[*subscriber]struct{}{}},
		owners: map[string]*peer{}, watchers: map[string]*peer{}, delivered: map[string]delivery{}}
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
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, ok := s.authorized(r)
		if !ok {
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
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, mode websocket.CompressionMode) (*websocket.Conn, func(), error) {
	s.conns.Add(1)
	c, err := s.accept(w, r, mode)
	if err != nil {
		s.conns.Done()
		return nil, nil, err
	}
	return c, func() { c.CloseNow(); s.conns.Done() }, nil
}

// appCompression: apps (browsers, which always offer permessage-deflate)
// get compressed frames. Session JSON shrinks several times over, which
// makes a long history arrive much sooner on a phone's network (and even on
// loopback, in Chromium). CLIs do not ask for it and pay nothing.
const appCompression = websocket.CompressionContextTakeover

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

func errorFrame(code, format string, args ...any) protocol.Frame {
	return protocol.Frame{Type: protocol.FrameError, Code: code, Message: fmt.Sprintf(format, args...)}
}

// readFrames calls handle for every frame read from c until the connection
// ends. A malformed frame gets an error frame and reading goes on.
func (s *Server) readFrames(ctx context.Context, c *websocket.Conn, handle func(protocol.Frame) error) error {
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		var f protocol.Frame
		if err := json.Unmarshal(data, &f); err != nil {
			if werr := writeFrame(ctx, c, errorFrame("bad-frame", "not a JSON frame: %v", err)); werr != nil {
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

func (s *Server) serveCLI(w http.ResponseWriter, r *http.Request) {
	c, done, err := s.upgrade(w, r, websocket.CompressionDisabled)
	if err != nil {
		return
	}
	defer done()
	ctx := r.Context()
	me := &peer{c: c}
	defer s.disown(me)
	err = s.readFrames(ctx, c, func(f protocol.Frame) error {
		switch f.Type {
		case protocol.FrameEnvelopes:
			if err := s.claim(ctx, f.Session); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: err.Error()})
			}
			ack, ferr := s.storeBatch(ctx, f)
			if ferr != nil {
				ferr.Ref = f.Ref
				return writeFrame(ctx, c, *ferr)
			}
			ack.Ref = f.Ref
			fresh := s.setOwner(f.Session, me)
			if err := writeFrame(ctx, c, ack); err != nil {
				return err
			}
			if fresh {
				s.deliverQueued(ctx, f.Session, me)
			}
			return nil
		case protocol.FrameLive:
			if s.mine(ctx, f.Session) != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: "not a session of this token"})
			}
			if f.Session == "" || len(f.Payload) == 0 || f.Payload[0] != '{' {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-live", Message: "a live frame needs a session and an object payload"})
			}
			frame, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameLive, Session: f.Session, Payload: f.Payload})
			s.hub.publish(f.Session, published{frame: frame, live: true})
			return nil
		case protocol.FrameResult:
			if s.mine(ctx, f.Session) != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: "not a session of this token"})
			}
			if f.Command == nil || f.Command.ID == "" || (f.Status != protocol.StatusDone && f.Status != protocol.StatusRejected) {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "bad-result", Message: "a result needs a command id and status done or rejected"})
			}
			s.commandStatus(ctx, f.Session, f.Command.ID, f.Status, f.Message)
			return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameAck, Ref: f.Ref, Session: f.Session})
		case protocol.FrameAnnounce:
			if f.Session == "" {
				return writeFrame(ctx, c, errorFrame("bad-announce", "announce needs a session"))
			}
			if err := s.claim(ctx, f.Session); err != nil {
				return writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameError, Ref: f.Ref, Code: "forbidden", Message: err.Error()})
			}
			si, err := s.store.Announce(ctx, f.Session, f.Info)
			if err != nil {
				e := errorFrame("bad-announce", "%v", err)
				e.Ref = f.Ref
				return writeFrame(ctx, c, e)
			}
			s.hub.sessionChanged(si)
			fresh := s.setOwner(f.Session, me)
			if err := writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameAck, Ref: f.Ref, Session: f.Session}); err != nil {
				return err
			}
			if fresh {
				s.deliverQueued(ctx, f.Session, me)
			}
			return nil
		default:
			return writeFrame(ctx, c, errorFrame("bad-type", "unknown frame type %q on the CLI endpoint", f.Type))
		}
	})
	s.closeStatus(c, err)
}

func (s *Server) closeStatus(c *websocket.Conn, err error) {
	var ce websocket.CloseError
	switch {
	case errors.As(err, &ce):
	case errors.Is(err, context.Canceled):
		c.Close(websocket.StatusGoingAway, "relay shutting down")
	default:
		s.log.Debug("connection ended", "err", err)
	}
}

// storeBatch stores a batch and publishes what is new to the apps.
func (s *Server) storeBatch(ctx context.Context, f protocol.Frame) (protocol.Frame, *protocol.Frame) {
	if f.Session == "" || len(f.Envelopes) == 0 || len(f.Envelopes) > maxBatch {
		e := errorFrame("bad-batch", "a batch needs a session and 1 to %d envelopes", maxBatch)
		return protocol.Frame{}, &e
	}
	items := make([]Item, len(f.Envelopes))
	for i, raw := range f.Envelopes {
		var env protocol.Envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return protocol.Frame{}, &e
		}
		if err := env.Validate(); err != nil {
			e := errorFrame("bad-envelope", "envelope %d: %v", i, err)
			return protocol.Frame{}, &e
		}
		items[i] = Item{ID: env.ID, Body: raw}
	}
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	last, err := s.store.LastSeq(ctx, f.Session)
	if err != nil {
		e := errorFrame("store", "%v", err)
		return protocol.Frame{}, &e
	}
	seqs, err := s.store.Append(ctx, f.Session, items)
	if err != nil {
		e := errorFrame("store", "%v", err)
		return protocol.Frame{}, &e
	}
	ack := protocol.Frame{Type: protocol.FrameAck, Session: f.Session, Acks: make([]protocol.Ack, len(items))}
	var fresh []Stored
	for i, it := range items {
		ack.Acks[i] = protocol.Ack{ID: it.ID, Seq: seqs[i]}
		if seqs[i] > last {
			fresh = append(fresh, Stored{Seq: seqs[i], ID: it.ID, Body: it.Body})
			last = seqs[i]
		}
	}
	if len(fresh) > 0 {
		s.hub.publish(f.Session, newPublished(f.Session, fresh))
		if si, err := s.store.session(ctx, f.Session); err == nil {
			s.hub.sessionChanged(si)
		}
	}
	return ack, nil
}

func (s *Server) serveApp(w http.ResponseWriter, r *http.Request) {
	c, done, err := s.upgrade(w, r, appCompression)
	if err != nil {
		return
	}
	defer done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	err = s.readFrames(ctx, c, func(f protocol.Frame) error {
		switch f.Type {
		case protocol.FrameCommand:
			return s.command(ctx, &peer{c: c}, f)
		case protocol.FrameList:
			// Register first, then list: no change is missed in between
			// (a change may arrive twice; it carries the whole state).
			l := s.hub.addLister(ownerFrom(ctx))
			all, err := s.store.SessionsOf(ctx, ownerFrom(ctx))
			if err != nil {
				s.hub.removeLister(l)
				return writeFrame(ctx, c, errorFrame("store", "%v", err))
			}
			sums := make([]protocol.SessionSummary, len(all))
			for i, si := range all {
				sums[i] = summary(si)
			}
			if err := writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameSessions, Sessions: sums}); err != nil {
				s.hub.removeLister(l)
				return err
			}
			wg.Go(func() {
				defer s.hub.removeLister(l)
				for {
					select {
					case <-ctx.Done():
						return
					case <-l.dropped:
						c.Close(websocket.StatusTryAgainLater, "session list fell behind; list again")
						return
					case frame := <-l.ch:
						if writeRaw(ctx, c, frame) != nil {
							return
						}
					}
				}
			})
			return nil
		case protocol.FrameSubscribe:
			if f.Session == "" {
				return writeFrame(ctx, c, errorFrame("bad-subscribe", "subscribe needs a session"))
			}
			if err := s.mine(ctx, f.Session); err != nil {
				return writeFrame(ctx, c, errorFrame("not-found", "no session %s for this token", f.Session))
			}
			sub := s.hub.add(f.Session)
			wg.Go(func() {
				defer s.hub.remove(f.Session, sub)
				if err := s.stream(ctx, c, f.Session, f.After, sub); err != nil && ctx.Err() == nil {
					s.log.Debug("subscription ended", "session", f.Session, "err", err)
					c.Close(websocket.StatusTryAgainLater, "subscription fell behind; subscribe again from the last seq")
				}
			})
			return nil
		default:
			return writeFrame(ctx, c, errorFrame("bad-type", "unknown frame type %q on the app endpoint", f.Type))
		}
	})
	cancel()
	s.closeStatus(c, err)
}

// stream sends the history of session after `after`, then live envelopes,
// with no gap and no duplicate between the two. The subscriber is
// registered before the history is read, so nothing stored meanwhile is
// missed; what both deliver is sent once.
func (s *Server) stream(ctx context.Context, c *websocket.Conn, session string, after int64, sub *subscriber) error {
	last := after
	sendFrom := func() error {
		for {
			page, err := s.store.Read(ctx, session, last, historyPage)
			if err != nil {
				return err
			}
			if len(page) > 0 {
				if err := writeRaw(ctx, c, batchFrame(session, page)); err != nil {
					return err
				}
				last = page[len(page)-1].Seq
			}
			if len(page) < historyPage {
				return nil
			}
		}
	}
	if err := sendFrom(); err != nil {
		return err
	}
	if err := writeFrame(ctx, c, protocol.Frame{Type: protocol.FrameCaughtUp, Session: session, Seq: last}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.dropped:
			return errors.New("subscriber fell behind")
		case pub := <-sub.ch:
			if pub.live {
				if err := writeRaw(ctx, c, pub.frame); err != nil {
					return err
				}
				continue
			}
			if pub.rows[0].Seq == last+1 {
				// The common case: encoded once for every app.
				if err := writeRaw(ctx, c, pub.frame); err != nil {
					return err
				}
				last = pub.rows[len(pub.rows)-1].Seq
				continue
			}
			if pub.rows[len(pub.rows)-1].Seq <= last {
				continue // already sent with the history
			}
			// Overlaps the history, or (should not happen) leaves a gap:
			// send what follows last from the store.
			if err := sendFrom(); err != nil {
				return err
			}
		}
	}
}

// published is one stored batch on its way to the apps, with its frame
// encoded once.
type published struct {
	rows  []Stored
	frame []byte
	live  bool // not stored: sent as is, outside the sequence
}

func newPublished(session string, rows []Stored) published {
	return published{rows: rows, frame: batchFrame(session, rows)}
}

// batchFrame encodes a FrameBatch of stored envelopes. It is written by hand
// (the bytes json.Marshal would give): the envelopes were validated when
// stored, and re-validating every one of them on each history read was most
// of the cost of opening a long session.
func batchFrame(session string, rows []Stored) []byte {
	sess, _ := json.Marshal(session)
	n := 64 + len(sess)
	for _, r := range rows {
		n += len(r.Body) + 32
	}
	b := make([]byte, 0, n)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, protocol.FrameVersion, 10)
	b = append(b, `,"type":"`+protocol.FrameBatch+`","session":`...)
	b = append(b, sess...)
	b = append(b, `,"items":[`...)
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"seq":`...)
		b = strconv.AppendInt(b, r.Seq, 10)
		b = append(b, `,"envelope":`...)
		b = append(b, r.Body...)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func writeRaw(ctx context.Context, c *websocket.Conn, frame []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, frame)
}

// hub fans stored envelopes out to the apps subscribed to their session,
// and session changes to the apps that listed the sessions.
type hub struct {
	mu      sync.Mutex
	subs    map[string]map[*subscriber]struct{}
	listers map[*lister]struct{}
}

type lister struct {
	owner   string
	ch      chan []byte
	dropped chan struct{}
	once    sync.Once
}

func summary(si SessionInfo) protocol.SessionSummary {
	return protocol.SessionSummary{ID: si.ID, Info: si.Info, Prompt: si.Prompt, LastSeq: si.LastSeq, Updated: si.UpdatedMS}
}

func (h *hub) addLister(owner string) *lister {
	l := &lister{owner: owner, ch: make(chan []byte, subscriberSlack), dropped: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listers == nil {
		h.listers = map[*lister]struct{}{}
	}
	h.listers[l] = struct{}{}
	return l
}

func (h *hub) removeLister(l *lister) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.listers, l)
}

// sessionChanged sends a session's new state to every lister; a lister
// that cannot keep up is dropped.
func (h *hub) sessionChanged(si SessionInfo) {
	frame, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameSession, Sessions: []protocol.SessionSummary{summary(si)}})
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listers {
		if l.owner != si.Owner {
			continue
		}
		select {
		case l.ch <- frame:
		default:
			l.once.Do(func() { close(l.dropped) })
		}
	}
}

type subscriber struct {
	ch      chan published
	dropped chan struct{}
	once    sync.Once
}

func (h *hub) add(session string) *subscriber {
	sub := &subscriber{ch: make(chan published, subscriberSlack), dropped: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[session] == nil {
		h.subs[session] = map[*subscriber]struct{}{}
	}
	h.subs[session][sub] = struct{}{}
	return sub
}

func (h *hub) remove(session string, sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[session], sub)
	if len(h.subs[session]) == 0 {
		delete(h.subs, session)
	}
}

// publish never blocks: a subscriber whose buffer is full is dropped (its
// app reconnects and catches up from its last sequence number).
func (h *hub) publish(session string, batch published) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs[session] {
		select {
		case sub.ch <- batch:
		default:
			sub.once.Do(func() { close(sub.dropped) })
		}
	}
}

// setOwner makes cli the owner of session (commands go to it from now on)
// and reports whether it is new in that role.
func (s *Server) setOwner(session string, cli *peer) bool {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	prev := s.owners[session]
	s.owners[session] = cli
	return prev != cli
}

// deliverQueued hands a session's queued commands to its new owner.
func (s *Server) deliverQueued(ctx context.Context, session string, cli *peer) {
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	queued, err := s.store.QueuedCommands(ctx, session)
	if err != nil {
		s.log.Warn("queued commands", "session", session, "err", err)
		return
	}
	for _, q := range queued {
		var cmd protocol.Command
		if json.Unmarshal(q.Body, &cmd) != nil {
			continue
		}
		if cli.send(ctx, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &cmd}) != nil {
			return
		}
		s.markDelivered(cli, session, cmd.ID)
		s.commandStatus(ctx, session, cmd.ID, protocol.StatusDelivered, "")
	}
}

func (s *Server) markDelivered(cli *peer, session, id string) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	s.delivered[id] = delivery{cli: cli, session: session}
}

// disown forgets cli as the owner of its sessions. Commands it received
// and never answered go back to the queue (prompts, delivered again to the
// next CLI: at least once, the id lets a CLI drop a repeat) or are rejected.
func (s *Server) disown(cli *peer) {
	s.peersMu.Lock()
	for session, p := range s.owners {
		if p == cli {
			delete(s.owners, session)
		}
	}
	pending := map[string]string{}
	for id, d := range s.delivered {
		if d.cli == cli {
			pending[id] = d.session
			delete(s.delivered, id)
		}
	}
	s.peersMu.Unlock()
	ctx := context.Background()
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	for id, session := range pending {
		c, err := s.store.Command(ctx, id)
		if err != nil {
			continue
		}
		var cmd protocol.Command
		if json.Unmarshal(c.Body, &cmd) == nil && cmd.Kind == protocol.CommandPrompt {
			s.commandStatus(ctx, session, id, protocol.StatusQueued, "")
			// Another CLI may own the session by now: hand it over.
			s.peersMu.Lock()
			owner := s.owners[session]
			s.peersMu.Unlock()
			if owner != nil && owner.send(ctx, protocol.Frame{Type: protocol.FrameCommand, Session: session, Command: &cmd}) == nil {
				s.markDelivered(owner, session, id)
				s.commandStatus(ctx, session, id, protocol.StatusDelivered, "")
			}
		} else {
			s.commandStatus(ctx, session, id, protocol.StatusRejected, "the CLI disconnected before answering")
		}
	}
}

// command takes a command from an app: stored once per id, handed to the
// CLI that owns the session, or queued (prompts) or rejected (everything
// else) while no CLI is connected for it.
func (s *Server) command(ctx context.Context, app *peer, f protocol.Frame) error {
	cmd := f.Command
	if f.Session == "" || cmd == nil || cmd.ID == "" || !protocol.ValidCommandKind(cmd.Kind) {
		return app.send(ctx, errorFrame("bad-command", "a command needs a session, an id and a known kind"))
	}
	if err := s.mine(ctx, f.Session); err != nil {
		return app.send(ctx, errorFrame("not-found", "no session %s for this token", f.Session))
	}
	body, _ := json.Marshal(cmd)
	s.cmdMu.Lock()
	defer s.cmdMu.Unlock()
	stored, isNew, err := s.store.AddCommand(ctx, f.Session, cmd.ID, body, protocol.StatusQueued)
	if err != nil {
		return app.send(ctx, errorFrame("store", "%v", err))
	}
	if !isNew { // a resend: say where it stands
		return app.send(ctx, protocol.Frame{Type: protocol.FrameStatus, Session: stored.Session, Command: &protocol.Command{ID: cmd.ID}, Status: stored.Status, Message: stored.Message})
	}
	s.peersMu.Lock()
	s.watchers[cmd.ID] = app
	owner := s.owners[f.Session]
	s.peersMu.Unlock()
	switch {
	case owner != nil && owner.send(ctx, protocol.Frame{Type: protocol.FrameCommand, Session: f.Session, Command: cmd}) == nil:
		s.markDelivered(owner, f.Session, cmd.ID)
		s.commandStatus(ctx, f.Session, cmd.ID, protocol.StatusDelivered, "")
	case cmd.Kind == protocol.CommandPrompt:
		s.commandStatus(ctx, f.Session, cmd.ID, protocol.StatusQueued, "")
	default:
		s.commandStatus(ctx, f.Session, cmd.ID, protocol.StatusRejected, "no CLI is connected for this session")
	}
	return nil
}

// commandStatus records a command's status and tells the app that sent it.
// An answered command is no longer pending on the CLI it was delivered to.
func (s *Server) commandStatus(ctx context.Context, session, id, status, message string) {
	if status == protocol.StatusDone || status == protocol.StatusRejected {
		s.peersMu.Lock()
		delete(s.delivered, id)
		s.peersMu.Unlock()
	}
	if err := s.store.SetCommandStatus(ctx, id, status, message); err != nil {
		s.log.Warn("command status", "id", id, "err", err)
	}
	s.peersMu.Lock()
	app := s.watchers[id]
	if status == protocol.StatusDone || status == protocol.StatusRejected {
		delete(s.watchers, id)
	}
	s.peersMu.Unlock()
	if app != nil {
		_ = app.send(ctx, protocol.Frame{Type: protocol.FrameStatus, Session: session, Command: &protocol.Command{ID: id}, Status: status, Message: message})
	}
}

// claim makes the request's token the owner of session, or fails if the
// session belongs to another token.
func (s *Server) claim(ctx context.Context, session string) error {
	if session == "" {
		return nil // the batch is refused as malformed later
	}
	return s.store.Claim(ctx, session, ownerFrom(ctx))
}

// mine fails unless session exists and belongs to the request's token.
func (s *Server) mine(ctx context.Context, session string) error {
	owner, err := s.store.OwnerOf(ctx, session)
	if err != nil {
		return err
	}
	if owner != ownerFrom(ctx) {
		return ErrForbidden
	}
	return nil
}
