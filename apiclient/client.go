package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// Config configures a Client.
type Config struct {
	// URL of the relay, http(s)://host:port; the CLI endpoint is /ws/cli.
	URL   string
	Token string
	// BatchSize bounds the envelopes in one frame (default 200).
	BatchSize int
	// MinBackoff and MaxBackoff bound the jittered exponential reconnect
	// delay (defaults 100 ms and 30 s).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// Client sends the outbox to the relay: oldest first, one batch in flight,
// an envelope dropped from the outbox only once acknowledged. It reconnects
// by itself and resends what was not acknowledged.
type Client struct {
	cfg Config
	box *Outbox
	log *slog.Logger
}

// NewClient returns a client for box.
func NewClient(cfg Config, box *Outbox) *Client {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 200
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Client{cfg: cfg, box: box, log: cfg.Logger}
}

// ErrUnauthorized means the relay refused the token: retrying will not help.
var ErrUnauthorized = errors.New("the relay refused the token")

// Run sends until ctx is done. It returns ErrUnauthorized at once if the
// relay refuses the token; other failures are retried with backoff.
func (c *Client) Run(ctx context.Context) error {
	backoff := c.cfg.MinBackoff
	for {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrUnauthorized) {
			return err
		}
		if errors.Is(err, errProgress) {
			backoff = c.cfg.MinBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1) // jitter: [b/2, b]
		c.log.Info("relay connection lost; reconnecting", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(backoff*2, c.cfg.MaxBackoff)
	}
}

// Flush waits until the outbox is empty (everything acknowledged) or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for c.box.Pending() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("flush: %d bytes not acknowledged: %w", c.box.Pending(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// errProgress marks a connection that acknowledged something before it
// ended, so the backoff starts over.
var errProgress = errors.New("connection ended after progress")

func (c *Client) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, resp, err := websocket.Dial(dctx, wsURL(c.cfg.URL)+"/ws/cli", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.cfg.Token}}})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return ErrUnauthorized
		}
		return fmt.Errorf("connect to %s: %w", c.cfg.URL, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	progressed := false
	for {
		b, err := c.box.next(c.cfg.BatchSize)
		if err != nil {
			return err
		}
		if b == nil {
			select {
			case <-ctx.Done():
				conn.Close(websocket.StatusNormalClosure, "")
				return nil
			case <-c.box.notify:
				continue
			}
		}
		if len(b.envelopes) == 0 { // only unreadable lines
			if err := c.box.ack(b.end); err != nil {
				return err
			}
			continue
		}
		if err := c.sendBatch(ctx, conn, b); err != nil {
			if progressed {
				return fmt.Errorf("%w: %v", errProgress, err)
			}
			return err
		}
		progressed = true
	}
}

func (c *Client) sendBatch(ctx context.Context, conn *websocket.Conn, b *batch) error {
	f := protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameEnvelopes, Session: b.session, Envelopes: b.envelopes}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := conn.Write(wctx, websocket.MessageText, data); err != nil {
		return fmt.Errorf("send batch: %w", err)
	}
	_, reply, err := conn.Read(wctx)
	if err != nil {
		return fmt.Errorf("wait for ack: %w", err)
	}
	var ack protocol.Frame
	if err := json.Unmarshal(reply, &ack); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	switch {
	case ack.Type == protocol.FrameError && (ack.Code == "bad-envelope" || ack.Code == "bad-batch"):
		// The relay refuses this batch for what it is: it would refuse it
		// again; skip it rather than block everything behind it.
		c.log.Error("relay refused a batch; dropping it", "code", ack.Code, "message", ack.Message, "session", b.session)
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

func wsURL(u string) string {
	switch {
	case len(u) > 7 && u[:7] == "http://":
		return "ws://" + u[7:]
	case len(u) > 8 && u[:8] == "https://":
		return "wss://" + u[8:]
	}
	return u
}
