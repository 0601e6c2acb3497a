package push

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Subscription is a browser's push subscription, as PushSubscription's
// toJSON() gives it.
type Subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// Check says whether s can be sent to: an absolute URL, a P-256 public
// key and a 16-byte auth secret (base64url).
func (s Subscription) Check() error {
	if _, err := Origin(s.Endpoint); err != nil {
		return err
	}
	p, err := b64.DecodeString(s.Keys.P256dh)
	if err != nil || len(p) != 65 || p[0] != 4 {
		return fmt.Errorf("p256dh is not an uncompressed P-256 point in base64url")
	}
	a, err := b64.DecodeString(s.Keys.Auth)
	if err != nil || len(a) != authBytes {
		return fmt.Errorf("auth is not %d bytes of base64url", authBytes)
	}
	return nil
}

// Urgency of a message (RFC 8030 section 5.3).
const (
	UrgencyNormal = "normal"
	UrgencyHigh   = "high"
)

// DefaultTTL is how long a push service keeps a message for an offline
// browser (RFC 8030 TTL): a notification older than this is not worth
// showing.
const DefaultTTL = 6 * time.Hour

// WebPush sends encrypted messages to browsers' push services. Make it with
// NewWebPush and Run it.
type WebPush struct {
	keys    *Keys
	subject string
	q       *queue
	now     func() time.Time
}

// NewWebPush returns a sender signing with keys; subject is the relay's
// contact for push services (mailto: or https:). A nil client gets one with
// SendTimeout that follows no redirect, uses no proxy and connects only to
// public addresses (see ErrPrivateAddress).
func NewWebPush(keys *Keys, subject string, client *http.Client, log *slog.Logger) *WebPush {
	if client == nil {
		client = publicClient()
	}
	return &WebPush{keys: keys, subject: subject, q: newQueue(client, log), now: time.Now}
}

// Run delivers queued messages until ctx ends.
func (w *WebPush) Run(ctx context.Context) { w.q.run(ctx) }

// Send queues payload for sub (never blocking): ErrQueueFull when MaxQueue
// messages wait, ErrPayloadTooBig, or an error for a subscription that
// cannot be sent to. onGone runs (on Run's goroutine) when the push
// service says the subscription no longer exists (404 or 410).
func (w *WebPush) Send(sub Subscription, payload []byte, urgency string, ttl time.Duration, onGone func()) error {
	if err := sub.Check(); err != nil {
		return err
	}
	if len(payload) > MaxPayloadBytes {
		return ErrPayloadTooBig
	}
	p256dh, _ := b64.DecodeString(sub.Keys.P256dh)
	auth, _ := b64.DecodeString(sub.Keys.Auth)
	origin, _ := Origin(sub.Endpoint)
	return w.q.add(&job{what: origin, onGone: onGone, do: func() (*http.Request, error) {
		body, err := Encrypt(payload, p256dh, auth)
		if err != nil {
			return nil, err
		}
		authz, err := w.keys.Authorization(sub.Endpoint, w.subject, w.now())
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequest(http.MethodPost, sub.Endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", authz)
		req.Header.Set("Content-Encoding", "aes128gcm")
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("TTL", strconv.Itoa(int(ttl.Seconds())))
		if urgency != "" {
			req.Header.Set("Urgency", urgency)
		}
		return req, nil
	}})
}
