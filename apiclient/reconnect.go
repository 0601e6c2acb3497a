package apiclient

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Reconnecting after the relay went away (docs/operate.md, "When the relay
// restarts"): full connection attempts follow the jittered backoff
// (MinBackoff to MaxBackoff), while cheap probes, a GET of the relay's
// /healthz, look every ProbeInterval for the relay to answer again. A
// probe that finds it answering after it did not ends the wait at once. A
// relay that answers all along (it refuses the connection: too many
// connections, a proxy that will not upgrade) gets the whole backoff.
const (
	// DefaultProbeInterval is how often a waiting client probes the
	// relay: the relay is connected to within about this long of
	// answering again.
	DefaultProbeInterval = 500 * time.Millisecond
	// ProbeTimeout bounds one probe.
	ProbeTimeout = time.Second
	// StableConnection is how long a connection must have stayed up for
	// its end to count as a new outage rather than a refusal: the
	// backoff starts over and the relay is looked for at once.
	StableConnection = 10 * time.Second
)

// newProbeClient returns the HTTP client of the probes: the proxy settings
// of the websocket's (the environment's), a fresh connection each time (a
// kept one would say nothing of the relay's port), no redirect followed.
func newProbeClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	return &http.Client{Transport: t, Timeout: ProbeTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// notAnswering reports whether a failed connection attempt says the relay
// itself is not there: no HTTP answer at all (status 0: refused, reset,
// timed out, host not found), or a proxy in front of it saying so (502,
// 504). A 503 may be the relay's own refusal (too many connections): the
// probes tell.
func notAnswering(status int) bool {
	return status == 0 || status == http.StatusBadGateway || status == http.StatusGatewayTimeout
}

// probe reports whether the relay answers: any HTTP response to GET
// /healthz but a proxy's "bad gateway", "unavailable" or "gateway timeout"
// (the relay's /healthz answers 200 whenever it runs). A 503 with
// Retry-After is the relay's own refusal (over --max-conns): it answers.
func (c *Client) probe(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, httpURL(c.cfg.URL)+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := c.probes.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return resp.Header.Get("Retry-After") != ""
	}
	return !notAnswering(resp.StatusCode)
}

// waitRetry waits before the next connection attempt: wait, or less when
// the relay comes back. Meanwhile it probes the relay every ProbeInterval;
// once a probe finds it answering after the failed attempt (down) or a
// probe found it not answering, the wait ends at once. It returns false
// when ctx ends.
func (c *Client) waitRetry(ctx context.Context, wait time.Duration, down bool) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	if wait <= c.cfg.ProbeInterval {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	// Probes are jittered ([interval/2, interval]): the clients of a
	// relay that restarts do not all come back in the same instant.
	next := func() time.Duration { return c.cfg.ProbeInterval/2 + rand.N(c.cfg.ProbeInterval/2+1) }
	probe := time.NewTimer(next())
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case <-probe.C:
			answered := c.probe(ctx)
			if c.onProbe != nil {
				c.onProbe(answered)
			}
			switch {
			case !answered:
				down = true
			case down:
				c.log.Info("the relay answers again; connecting now")
				return true
			}
			probe.Reset(next())
		}
	}
}

// httpURL is the relay's HTTP address for a URL given as http(s) or ws(s).
func httpURL(u string) string {
	switch {
	case strings.HasPrefix(u, "ws://"):
		u = "http://" + u[len("ws://"):]
	case strings.HasPrefix(u, "wss://"):
		u = "https://" + u[len("wss://"):]
	}
	return strings.TrimSuffix(u, "/")
}
