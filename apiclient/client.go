package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// MaxBatchBytes bounds the envelope JSON the client sends in one frame: a
// quarter of the relay's frame limit (relay.MaxFrameBytes, 8 MiB), so that
// a batch of large envelopes (a burst of big Write calls) never makes a
// frame the relay refuses. One envelope is at most
// protocol.MaxEnvelopeBytes (the mapper caps what would be larger), so a
// batch that starts with one still fits.
const MaxBatchBytes = 2 << 20

// Config configures a Client.
type Config struct {
	// URL of the relay, http(s)://host:port; the CLI endpoint is /ws/cli.
	URL   string
	Token string
	// BatchSize bounds the envelopes in one frame (default 200).
	BatchSize int
	// BatchBytes bounds the envelope JSON in one frame (default
	// MaxBatchBytes); a single envelope larger than it goes alone.
	BatchBytes int
	// MinBackoff and MaxBackoff bound the jittered exponential reconnect
	// delay (defaults 100 ms and 30 s). While the relay does not answer,
	// it is probed every ProbeInterval (default DefaultProbeInterval) and
	// connected to as soon as it answers again, whatever the backoff.
	MinBackoff, MaxBackoff time.Duration
	ProbeInterval          time.Duration
	// AnswerTimeout bounds how long a relay that took the connection has
	// to answer (a ping) before it counts as not reached (default
	// dialTimeout).
	AnswerTimeout time.Duration
	// ReplyTimeout bounds how long the relay has to reply to a frame
	// (default 30 s): past it the connection is given up and the relay
	// counts as not reached.
	ReplyTimeout time.Duration
	Logger       *slog.Logger
	// Keyring, when set, is the machine's end-to-end state: the client
	// sends the relay the keys of sealed sessions, wrapped for the devices
	// it trusts (the outbox seals with the same keyring).
	Keyring *Keyring
	// Notice is where the user hears about the relay (stderr): at once
	// when it cannot be reached, and why, and that sending goes on being
	// retried; once when it is reached again; when it refuses the token.
	// Once per outage, not on every retry. nil: silent.
	Notice io.Writer
}

// Client sends the outbox to the relay: oldest first, one batch in flight,
// an envelope dropped from the outbox only once acknowledged. It reconnects
// by itself and resends what was not acknowledged.
type Client struct {
	cfg    Config
	box    *Outbox
	log    *slog.Logger
	probes *http.Client // asks whether the relay answers (waitRetry)
	// onProbe, when set (tests), hears each probe's result.
	onProbe func(answered bool)

	inbound chan Inbound
	live    chan protocol.Frame

	mu       sync.Mutex
	conn     *conn                     // the current connection, nil while offline
	announce map[string][]byte         // session -> latest announced info
	acked    map[string]string         // session -> the latest info the relay took (or refused for good)
	changed  chan struct{}             // an announcement to send
	unsent   map[string]protocol.Frame // session/command id -> a result not acknowledged
	refused  bool                      // the relay refused the token: Run ended
	// stage is how far the current attempt got, since stageSince
	// (attempt.go).
	stage      Stage
	stageSince time.Time

	unreachable bool // the user was told the relay cannot be reached
	// limit bounds the next batch: the configured bounds, smaller after a
	// batch was lost with its connection (batchLimit). Used by Run's
	// goroutine only.
	limit batchLimit

	deleted map[string]bool // sessions the relay said were deleted

	devices      []protocol.DeviceInfo // the account's keyed devices, as the relay last said
	devicesKnown bool
	keysSent     map[string]string // session -> the epoch and devices its keys were sent for
	owned        map[string]bool   // sessions this client sends (their keys rotate on a revocation)
	keysDirty    bool              // the device list changed: sync every session's keys
	trustStamp   string            // the trusted devices file when keys were last synced
}

// codeDeleted is the relay's answer for a session that was deleted.
const codeDeleted = "deleted"

// markDeleted remembers that the relay deleted session: what the outbox
// holds for it is dropped, and it is neither written nor announced again.
func (c *Client) markDeleted(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted == nil {
		c.deleted = map[string]bool{}
	}
	if !c.deleted[session] {
		c.log.Warn("the session was deleted on the relay; its envelopes are dropped", "session", session)
	}
	c.deleted[session] = true
	delete(c.announce, session)
	delete(c.acked, session)
}

// Deleted reports whether the relay said that session was deleted.
func (c *Client) Deleted(session string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleted[session]
}

// Inbound is a command from an app for one of this CLI's sessions. Answer
// it with Client.Reply.
type Inbound struct {
	Session string
	Command protocol.Command
}

// conn is one live connection: the reader routes replies by ref.
type conn struct {
	ws      *websocket.Conn
	mu      sync.Mutex
	nextRef int
	pending map[string]chan protocol.Frame
	dead    chan struct{}
	took    bool // the relay acknowledged a frame it keeps (stores)
	// replyTimeout bounds a request's write and the relay's reply.
	replyTimeout time.Duration
}

// stores reports whether a frame of type t is kept by the relay when it
// is acknowledged (not a question such as the device list).
func stores(t string) bool {
	return t == protocol.FrameEnvelopes || t == protocol.FrameAnnounce || t == protocol.FrameResult
}

// tookSomething reports whether the relay acknowledged, on cn, a frame it
// keeps.
func (cn *conn) tookSomething() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.took
}

// NewClient returns a client for box.
func NewClient(cfg Config, box *Outbox) *Client {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 200
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = MaxBatchBytes
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.AnswerTimeout <= 0 {
		cfg.AnswerTimeout = dialTimeout
	}
	if cfg.ReplyTimeout <= 0 {
		cfg.ReplyTimeout = DefaultReplyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Client{limit: batchLimit{count: cfg.BatchSize, bytes: cfg.BatchBytes}, probes: newProbeClient(), cfg: cfg, box: box, log: cfg.Logger, inbound: make(chan Inbound, 64), live: make(chan protocol.Frame, 256),
		announce: map[string][]byte{}, acked: map[string]string{}, changed: make(chan struct{}, 1), unsent: map[string]protocol.Frame{}}
}

// Commands delivers the commands apps send to this CLI's sessions.
func (c *Client) Commands() <-chan Inbound { return c.inbound }

// Announce describes a session to the relay (cwd, title, mode, status, …, a
// JSON object); sent now if connected, and again after every reconnect. The
// session's queued commands arrive once it is announced.
func (c *Client) Announce(session string, info json.RawMessage) {
	c.mu.Lock()
	if c.deleted[session] {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if kr := c.cfg.Keyring; kr != nil && kr.Sealing(session) {
		sealed, err := kr.SealInfo(session, info)
		if err != nil {
			// Never the plaintext of a sealed session.
			c.log.Error("could not seal the session's announcement; not sent", "session", session, "err", err)
			return
		}
		info = sealed
	}
	c.mu.Lock()
	c.announce[session] = append([]byte(nil), info...)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Live sends a live frame (a token delta) to the apps watching session. It
// is not stored and not retried: it never blocks, and is dropped while the
// relay is not connected or the link is behind.
func (c *Client) Live(session string, payload json.RawMessage) {
	if kr := c.cfg.Keyring; kr != nil && kr.Sealing(session) {
		sealed, err := kr.SealLive(session, payload)
		if err != nil {
			return
		}
		payload = sealed
	}
	select {
	case c.live <- protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameLive, Session: session, Payload: payload}:
	default:
	}
}

// sendLive writes live frames on the current connection until ctx ends.
func (c *Client) sendLive(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-c.live:
			c.mu.Lock()
			cn := c.conn
			c.mu.Unlock()
			if cn == nil {
				continue
			}
			data, err := json.Marshal(f)
			if err != nil {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = cn.ws.Write(wctx, websocket.MessageText, data)
			cancel()
		}
	}
}

// MaxUnsentReplies bounds the results kept to send again on the next
// connection; past it the oldest is forgotten (the relay delivers its
// command again, and the CLI's ledger answers it).
const MaxUnsentReplies = 1024

// Reply tells the relay (and the app) what became of a command: done, or
// rejected with a reason (sealed for a sealed session: resultFrame). A reply that fails (the relay is not connected,
// or the connection is lost before the relay acknowledged it) is sent
// again on the next connection, after the announcements.
func (c *Client) Reply(ctx context.Context, session, id string, ok bool, message string) error {
	status := protocol.StatusDone
	if !ok {
		status = protocol.StatusRejected
	}
	f := c.resultFrame(session, id, status, message)
	c.mu.Lock()
	cn := c.conn
	c.mu.Unlock()
	err := errors.New("not connected to the relay")
	if cn != nil {
		_, err = cn.request(ctx, f)
	}
	if err != nil {
		c.mu.Lock()
		if len(c.unsent) >= MaxUnsentReplies {
			for k := range c.unsent { // any one: the relay delivers its command again
				delete(c.unsent, k)
				break
			}
		}
		c.unsent[session+"/"+id] = f
		c.mu.Unlock()
	}
	return err
}

// sendUnsent sends again the results that were not acknowledged.
func (c *Client) sendUnsent(ctx context.Context, cn *conn) error {
	c.mu.Lock()
	todo := make(map[string]protocol.Frame, len(c.unsent))
	maps.Copy(todo, c.unsent)
	c.mu.Unlock()
	for k, f := range todo {
		if _, err := cn.request(ctx, f); err != nil {
			return err
		}
		// Acknowledged, or refused (answered meanwhile): either way done.
		c.mu.Lock()
		delete(c.unsent, k)
		c.mu.Unlock()
	}
	return nil
}

// request sends f with a fresh ref and waits for the relay's reply.
func (cn *conn) request(ctx context.Context, f protocol.Frame) (protocol.Frame, error) {
	cn.mu.Lock()
	cn.nextRef++
	f.Ref = "r" + strconv.Itoa(cn.nextRef)
	reply := make(chan protocol.Frame, 1)
	cn.pending[f.Ref] = reply
	cn.mu.Unlock()
	defer func() {
		cn.mu.Lock()
		delete(cn.pending, f.Ref)
		cn.mu.Unlock()
	}()
	f.V = protocol.FrameVersion
	data, err := json.Marshal(f)
	if err != nil {
		return protocol.Frame{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, cn.replyTimeout)
	defer cancel()
	// The relay stopped answering (its machine gone, a relay stuck): not
	// reached, and said so (Run).
	silent := func(err error) error {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return &silentError{after: cn.replyTimeout, err: err}
		}
		return err
	}
	if err := cn.ws.Write(wctx, websocket.MessageText, data); err != nil {
		return protocol.Frame{}, silent(fmt.Errorf("send %s: %w", f.Type, err))
	}
	select {
	case r := <-reply:
		if r.Type != protocol.FrameError && stores(f.Type) {
			cn.mu.Lock()
			cn.took = true
			cn.mu.Unlock()
		}
		return r, nil
	case <-cn.dead:
		return protocol.Frame{}, errors.New("connection lost while waiting for the relay's reply")
	case <-wctx.Done():
		return protocol.Frame{}, silent(fmt.Errorf("no reply to %s: %w", f.Type, wctx.Err()))
	}
}

// read routes every frame from the relay: replies to their request,
// commands to Commands.
func (c *Client) read(ctx context.Context, cn *conn) {
	defer close(cn.dead)
	refused := 0 // commands refused on this connection
	for {
		_, data, err := cn.ws.Read(ctx)
		if err != nil {
			return
		}
		var f protocol.Frame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		if f.Type == protocol.FrameDevices && f.Ref == "" {
			c.setDevices(f.Devices)
			continue
		}
		if f.Type == protocol.FrameCommand && f.Command != nil {
			if len(f.Session) > protocol.MaxFieldBytes || len(f.Command.ID) > protocol.MaxFieldBytes {
				// No app sends such a command, and the relay takes none
				// (Command.Validate): made up by the relay. Not answered,
				// not kept: its id and session could be of any size.
				refused++
				if logRefusal(refused) {
					c.log.Warn("dropped a command no app could send (its id or session is too long)", "session", clip(f.Session), "id", clip(f.Command.ID), "refused", refused)
				}
				continue
			}
			cmd, err := c.openCommand(f.Session, *f.Command)
			if err != nil {
				// Refused, and said why; logged: a relay (or someone on
				// the way) may be trying to steer this machine.
				refused++
				if logRefusal(refused) {
					c.log.Warn("command refused", "session", f.Session, "id", f.Command.ID, "err", err, "refused", refused)
				}
				c.queueReply(f.Session, f.Command.ID, err.Error())
				continue
			}
			select {
			case c.inbound <- Inbound{Session: f.Session, Command: cmd}:
			case <-ctx.Done():
				return
			}
			continue
		}
		cn.mu.Lock()
		ch := cn.pending[f.Ref]
		cn.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
}

// logRefusal says whether the nth command refused on a connection is
// logged: the first ten, then every thousandth (a relay that sends made-up
// commands without end does not fill the disk).
func logRefusal(n int) bool { return n <= 10 || n%1000 == 0 }

// clip is the start of a value the relay sent, for a log line.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// errUnsealed refuses a plaintext command to a sealed session: only a
// paired device can seal one, and anything that can send a command to a
// CLI can run code on its machine.
var errUnsealed = errors.New("this session is end-to-end encrypted: a command that is not sealed by a paired device is refused")

// openCommand opens a sealed command; a session that is sealed takes no
// other.
func (c *Client) openCommand(session string, cmd protocol.Command) (protocol.Command, error) {
	kr := c.cfg.Keyring
	switch {
	case kr == nil && cmd.Sealed != "":
		return cmd, errors.New("a sealed command, but this machine has no keys")
	case kr == nil:
		return cmd, nil
	case cmd.Sealed != "":
		return kr.OpenCommand(session, cmd)
	case kr.Sealing(session):
		return cmd, errUnsealed
	}
	return cmd, nil
}

// queueReply keeps a rejection for the sending loop (the reader must not
// wait for the relay's answer, which it reads itself).
func (c *Client) queueReply(session, id, message string) {
	f := c.resultFrame(session, id, protocol.StatusRejected, message)
	c.mu.Lock()
	if len(c.unsent) < MaxUnsentReplies {
		c.unsent[session+"/"+id] = f
	}
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// ErrUnauthorized means the relay refused the token: retrying will not help.
var ErrUnauthorized = errors.New("the relay refused the token")

// Run sends until ctx is done. It returns ErrUnauthorized at once if the
// relay refuses the token; other failures are retried with backoff.
func (c *Client) Run(ctx context.Context) error {
	liveCtx, stopLive := context.WithCancel(ctx)
	liveDone := make(chan struct{})
	go func() { defer close(liveDone); c.sendLive(liveCtx) }()
	defer func() { stopLive(); <-liveDone }()
	backoff := c.cfg.MinBackoff
	for {
		var upSince time.Time // when the connection was made; zero if it was not
		err := c.session(ctx, &upSince)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrUnauthorized) {
			c.mu.Lock()
			c.refused = true
			c.mu.Unlock()
			c.notice("ccrelay: the relay at %s refused the token (wrong or revoked): nothing is sent to it in this run; the envelopes are kept on disk for a run with the right token", c.cfg.URL)
			return err
		}
		var de *dialError
		var se *silentError
		if errors.As(err, &se) && !c.unreachable {
			c.unreachable = true
			c.notice("ccrelay: cannot reach the relay at %s: it stopped answering (no reply within %v: is the relay, or a proxy in front of it, stuck, or its machine gone or asleep?); retrying in the background until it answers (the envelopes are kept on disk)", c.cfg.URL, se.after)
		}
		if errors.As(err, &de) && !c.unreachable {
			c.unreachable = true
			if CertificateError(de) {
				// Not an outage: waiting does not help until the user acts.
				c.notice("ccrelay: cannot reach the relay at %s: %s; the envelopes are kept on disk and sent once the certificate is accepted", c.cfg.URL, de.reason())
			} else {
				c.notice("ccrelay: cannot reach the relay at %s: %s; retrying in the background until it answers (the envelopes are kept on disk)", c.cfg.URL, de.reason())
			}
		}
		// Whether the relay is known not to answer: the probes look
		// for it to come back (waitRetry).
		down := errors.As(err, &de) && notAnswering(de.status) || errors.As(err, &se)
		if errors.Is(err, errProgress) || !upSince.IsZero() && time.Since(upSince) >= StableConnection {
			// A connection that worked ended: a new outage, not a
			// refusal. Looked for at once, and from the shortest wait.
			backoff, down = c.cfg.MinBackoff, true
		}
		wait := backoff/2 + rand.N(backoff/2+1) // jitter: [b/2, b]
		c.log.Info("relay connection lost; reconnecting", "err", err, "in", wait)
		if !c.waitRetry(ctx, wait, down) {
			return nil
		}
		backoff = min(backoff*2, c.cfg.MaxBackoff)
	}
}

// Connected reports whether a connection to the relay is up now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil
}

// Refused reports whether the relay refused the token (Run ended with
// ErrUnauthorized).
func (c *Client) Refused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// Flush waits until everything is acknowledged (Settled) or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !c.Settled() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("flush: %d bytes, %d announcements and %d command results not acknowledged: %w",
				c.box.Pending(), c.unannounced(), c.unsentReplies(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Settled reports whether the relay acknowledged everything: the outbox
// is empty, each session's latest announcement was taken, and every
// command result was sent. A session's last state (a process that ends
// says why) reaches the relay only if its process waits for this.
func (c *Client) Settled() bool {
	return c.box.Pending() == 0 && c.unannounced() == 0 && c.unsentReplies() == 0
}

// unannounced counts the sessions whose latest announcement the relay has
// not taken yet.
func (c *Client) unannounced() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for session, info := range c.announce {
		if c.acked[session] != string(info) {
			n++
		}
	}
	return n
}

func (c *Client) unsentReplies() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unsent)
}

// notice tells the user something about the relay, if Config.Notice is set.
func (c *Client) notice(format string, args ...any) {
	if c.cfg.Notice != nil {
		fmt.Fprintf(c.cfg.Notice, format+"\n", args...)
	}
}

// dialError is a failure to connect to the relay (as opposed to a
// connection that ended).
type dialError struct {
	url    string
	err    error
	status int // the HTTP status of a refused upgrade, or 0
	// silent: the relay took the connection but did not answer within
	// this long.
	silent time.Duration
}

func (e *dialError) Error() string { return e.err.Error() }

// stopCloseWait is how long a client that stops waits for the relay to
// answer its close frame before it drops the connection.
const stopCloseWait = time.Second

// closeSoon closes ws with a close frame (ccrelay stops: the relay tells
// this from a connection lost, and its lists say so), waiting at most wait
// for the relay's answer: a relay that does not answer does not hold up
// ccrelay's exit.
func closeSoon(ws *websocket.Conn, wait time.Duration) {
	done := make(chan struct{})
	go func() { // owned here: waited for below, bounded by CloseNow
		defer close(done)
		ws.Close(websocket.StatusNormalClosure, "")
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		ws.CloseNow()
		<-done
	}
}
func (e *dialError) Unwrap() error { return e.err }

// reason says in a few words why the relay could not be reached.
func (e *dialError) reason() string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case e.silent != 0:
		return "it took the connection but did not answer within " + e.silent.String() + " (is the relay, or a proxy in front of it, stuck, or its machine gone or asleep?)"
	case Gateway(e.status) != nil:
		return Explain(e.url, Gateway(e.status))
	case e.status != 0:
		return fmt.Sprintf("it answered HTTP %d %s instead of accepting the connection (is that the relay's address?)", e.status, http.StatusText(e.status))
	case errors.Is(e.err, context.DeadlineExceeded), errors.As(e.err, &ne) && ne.Timeout() && !errors.As(e.err, &dns):
		return "no answer within " + dialTimeout.String() + " (is the address right, and can this machine reach it?)"
	}
	return Explain(e.url, e.err)
}

// DefaultReplyTimeout is how long the relay has to reply to a frame
// (Config.ReplyTimeout).
const DefaultReplyTimeout = 30 * time.Second

// silentError is a relay that stopped answering on a connection: no
// reply (or no room to write) within after.
type silentError struct {
	after time.Duration
	err   error
}

func (e *silentError) Error() string { return e.err.Error() }
func (e *silentError) Unwrap() error { return e.err }

// dialTimeout bounds one attempt to connect to the relay.
const dialTimeout = 10 * time.Second

// errProgress marks a connection on which the relay acknowledged something
// (a batch, an announcement, a result) before it ended, so the backoff
// starts over: the relay took the connection, the end is a new outage.
var errProgress = errors.New("connection ended after progress")

// session connects and sends until the connection ends; upSince is set
// when the connection is made.
func (c *Client) session(ctx context.Context, upSince *time.Time) (err error) {
	defer c.setStage(StageNone)
	dctx, cancel := context.WithTimeout(c.traceTaken(ctx), dialTimeout)
	ws, resp, err := websocket.Dial(dctx, wsURL(c.cfg.URL)+"/ws/cli", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.cfg.Token}}})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return ErrUnauthorized
		}
		de := &dialError{url: c.cfg.URL, err: fmt.Errorf("connect to %s: %w", c.cfg.URL, err)}
		if resp != nil {
			de.status = resp.StatusCode
		}
		return de
	}
	defer ws.CloseNow()
	ws.SetReadLimit(16 << 20)
	cn := &conn{ws: ws, pending: map[string]chan protocol.Frame{}, dead: make(chan struct{}), replyTimeout: c.cfg.ReplyTimeout}
	defer func() {
		if err != nil && !errors.Is(err, errProgress) && cn.tookSomething() {
			err = fmt.Errorf("%w: %w", errProgress, err)
		}
	}()
	// The reader ends with this connection, not with ctx: a read whose
	// context ends drops the connection at once, and a client that stops
	// (ctx ended) closes it itself below (a close frame, which tells the
	// relay that ccrelay stopped rather than lost its connection).
	rctx, stopRead := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRead()
	go c.read(rctx, cn)
	c.setStage(StageUpgraded)
	// A relay that took the connection answers a ping at once; one that
	// does not (its machine gone after the upgrade, a relay or a proxy
	// stuck) is not reached: said as such, instead of waiting silently
	// for the reply to a frame.
	pctx, cancel := context.WithTimeout(ctx, c.cfg.AnswerTimeout)
	err = ws.Ping(pctx)
	cancel()
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return &dialError{url: c.cfg.URL, err: fmt.Errorf("connect to %s: no answer: %w", c.cfg.URL, err), silent: c.cfg.AnswerTimeout}
	default: // closed by the relay (or on the way) before it answered
		return fmt.Errorf("connection lost before the relay answered: %w", err)
	}
	*upSince = time.Now()
	if c.unreachable {
		c.unreachable = false
		c.notice("ccrelay: reached the relay at %s again; sending what waited", c.cfg.URL)
	}
	c.setStage(StageConnected)
	c.mu.Lock()
	c.conn = cn
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.conn = nil
		c.mu.Unlock()
	}()
	if c.cfg.Keyring != nil {
		// The devices to wrap keys for, before the first sealed batch.
		f, err := cn.request(ctx, protocol.Frame{Type: protocol.FrameDevices})
		if err != nil {
			return err
		}
		if f.Type == protocol.FrameDevices {
			c.setDevices(f.Devices)
		}
	}
	sent := map[string]string{} // session -> info announced on this connection
	progressed := false
	for {
		b, err := c.box.next(c.limit.count, c.limit.bytes)
		if err != nil {
			return err
		}
		if err := c.syncKeys(ctx, cn); err != nil {
			return err
		}
		if b == nil {
			// Announcements and results follow every envelope appended
			// before them: a state never reaches the relay before what it
			// refers to (a permission request's tool call, a turn's end).
			if err := c.sendAnnouncements(ctx, cn, sent); err != nil {
				return err
			}
			if err := c.sendUnsent(ctx, cn); err != nil {
				return err
			}
			if b, err = c.box.next(c.limit.count, c.limit.bytes); err != nil {
				return err
			}
		}
		if b == nil {
			select {
			case <-ctx.Done():
				closeSoon(ws, stopCloseWait)
				return nil
			case <-cn.dead:
				return errors.New("connection lost")
			case <-c.changed:
				continue
			case <-c.box.notify:
				continue
			case <-c.trustPoll():
				continue // a device trusted meanwhile (ccrelay pair) gets its keys
			}
		}
		if len(b.envelopes) == 0 { // only unreadable lines
			if err := c.box.ack(b.end); err != nil {
				return err
			}
			continue
		}
		if sealedBatch(b) {
			if err := c.sendingKeys(ctx, cn, b.session); err != nil {
				return err
			}
		}
		if err := c.sendBatch(ctx, cn, b); err != nil {
			if ctx.Err() == nil {
				c.limit.shrink()
				c.log.Info("a batch was lost with its connection; sending smaller batches", "envelopes", c.limit.count, "bytes", c.limit.bytes)
			}
			if progressed {
				return fmt.Errorf("%w: %w", errProgress, err)
			}
			return err
		}
		progressed = true
		c.limit.grow(c.cfg.BatchSize, c.cfg.BatchBytes)
	}
}

// batchLimit bounds a batch in envelopes and bytes. A path that cuts
// connections after some bytes (a proxy's quota, a failing mobile link)
// may never carry a whole batch of the configured size: resent whole, it
// would be lost again on every connection and nothing would be delivered.
// So a batch lost with its connection halves the limit, down to one
// envelope (which always goes, whatever its size), and every acknowledged
// batch grows it back by a quarter, up to the configured bounds.
type batchLimit struct{ count, bytes int }

// minBatchBytes is the smallest byte bound a shrinking limit reaches; the
// count bound still goes down to one envelope.
const minBatchBytes = 4 << 10

func (l *batchLimit) shrink() {
	l.count = max(1, l.count/2)
	l.bytes = max(min(minBatchBytes, l.bytes), l.bytes/2)
}

func (l *batchLimit) grow(count, bytes int) {
	l.count = min(count, l.count+max(1, l.count/4))
	l.bytes = min(bytes, l.bytes+max(minBatchBytes, l.bytes/4))
}

func (c *Client) sendBatch(ctx context.Context, cn *conn, b *batch) error {
	if c.Deleted(b.session) {
		return c.box.ack(b.end)
	}
	ack, err := cn.request(ctx, protocol.Frame{Type: protocol.FrameEnvelopes, Session: b.session, Envelopes: b.envelopes, Blobs: b.blobs})
	if err != nil {
		return err
	}
	switch {
	case ack.Type == protocol.FrameError && (ack.Code == "bad-envelope" || ack.Code == "bad-batch"):
		// The relay refuses this batch for what it is: it would refuse it
		// again; skip it rather than block everything behind it.
		c.log.Error("relay refused a batch; dropping it", "code", ack.Code, "message", ack.Message, "session", b.session)
		return c.box.ack(b.end)
	case ack.Type == protocol.FrameError && ack.Code == codeDeleted:
		c.markDeleted(b.session)
		return c.box.ack(b.end)
	case ack.Type == protocol.FrameError:
		// A relay-side failure (storage): keep the batch, retry later.
		return fmt.Errorf("relay error %s: %s", ack.Code, ack.Message)
	case ack.Type != protocol.FrameAck || len(ack.Acks) != len(b.ids):
		return fmt.Errorf("unexpected reply %q with %d acks for %d envelopes", ack.Type, len(ack.Acks), len(b.ids))
	}
	for i, a := range ack.Acks {
		if a.ID != b.ids[i] {
			return fmt.Errorf("ack %d is for %s, sent %s", i, a.ID, b.ids[i])
		}
	}
	return c.box.ack(b.end)
}

// TrustPoll is how often an idle client with a keyring looks whether the
// machine trusts a new device (ccrelay pair writes the file).
const TrustPoll = 2 * time.Second

// trustPoll fires after TrustPoll when the client has a keyring, never
// otherwise.
func (c *Client) trustPoll() <-chan time.Time {
	if c.cfg.Keyring == nil {
		return nil
	}
	return time.After(TrustPoll)
}

// sealedBatch reports whether b holds a sealed envelope.
func sealedBatch(b *batch) bool {
	for _, e := range b.envelopes {
		if protocol.IsSealed(e) {
			return true
		}
	}
	return false
}

// retryable reports whether an error code from the relay is about the
// relay, not the frame: the same frame may be taken later.
func retryable(code string) bool { return code == "store" }

func wsURL(u string) string {
	switch {
	case len(u) > 7 && u[:7] == "http://":
		return "ws://" + u[7:]
	case len(u) > 8 && u[:8] == "https://":
		return "wss://" + u[8:]
	}
	return u
}

// sendAnnouncements sends the announcements not yet sent on this connection.
func (c *Client) sendAnnouncements(ctx context.Context, cn *conn, sent map[string]string) error {
	c.mu.Lock()
	var todo []string
	for session, info := range c.announce {
		if sent[session] != string(info) {
			todo = append(todo, session)
		}
	}
	c.mu.Unlock()
	for _, session := range todo {
		c.mu.Lock()
		info := c.announce[session]
		c.mu.Unlock()
		if protocol.IsSealed(info) {
			// The devices get the key with the session's first sight: an
			// app can seal its first prompt to it.
			if err := c.sendingKeys(ctx, cn, session); err != nil {
				return err
			}
		}
		reply, err := cn.request(ctx, protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Info: info})
		if err != nil {
			return err
		}
		if reply.Type == protocol.FrameError && reply.Code == codeDeleted {
			c.markDeleted(session)
			sent[session] = string(info)
			continue
		}
		if reply.Type == protocol.FrameError {
			if retryable(reply.Code) {
				// A failure of the relay's (its store): sent again after
				// a reconnect.
				return fmt.Errorf("relay refused an announcement of %s for now: %s: %s", session, reply.Code, reply.Message)
			}
			c.log.Error("relay refused an announcement", "session", session, "code", reply.Code, "message", reply.Message)
		}
		sent[session] = string(info)
		c.mu.Lock()
		c.acked[session] = string(info) // taken, or refused for good: nothing more to wait for
		c.mu.Unlock()
	}
	return nil
}
