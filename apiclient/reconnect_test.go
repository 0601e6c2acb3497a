package apiclient

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A relay that comes back is connected to within about ProbeInterval of
// answering again, however long the backoff has grown (here 20 s, the
// first wait at least 10 s): directly, behind a proxy that answers 502
// while the relay is down, and when the relay was down from the start.
// Without the probes every round waits out the backoff.
func TestReconnectSoonAfterRelayAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		proxy     bool
		startDown bool
		rounds    int
	}{
		{"relay restarted", false, false, 4},
		{"relay restarted behind a proxy", true, false, 3},
		{"relay down when the client starts", false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRelay(t)
			relayURL := "http://" + r.addr
			if tc.proxy {
				target, _ := url.Parse(relayURL)
				// A plain proxy (no X-Forwarded-For, which the relay
				// refuses from an address it does not trust).
				px := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
					ErrorLog: log.New(io.Discard, "", 0)})
				t.Cleanup(px.Close)
				relayURL = px.URL
			}
			if tc.startDown {
				r.halt()
			}
			box, err := OpenOutbox(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer box.Close()
			logs := failureLogs(t)
			cl := NewClient(Config{URL: relayURL, Token: token, MinBackoff: 20 * time.Second, MaxBackoff: 30 * time.Second,
				Logger: logs.logger()}, box)
			var unanswered atomic.Int64
			cl.onProbe = func(answered bool) {
				if !answered {
					unanswered.Add(1)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); cl.Run(ctx) }()
			defer func() { cancel(); <-done }()

			all := envs(sessA, 0, tc.rounds+1)
			var took []time.Duration
			for i := range tc.rounds {
				if !(tc.startDown && i == 0) {
					waitUntil(t, 30*time.Second, "the client to connect", cl.Connected)
					box.Append(ctx, sessA, all[i:i+1])
					fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
					if err := cl.Flush(fctx); err != nil {
						t.Fatal(err)
					}
					fcancel()
					r.halt()
				}
				// The relay is down for the client: offline, and a probe
				// found no relay.
				before := unanswered.Load()
				waitUntil(t, 30*time.Second, "a probe to find the relay down", func() bool {
					return !cl.Connected() && unanswered.Load() > before
				})
				r.start()
				answering := time.Now()
				waitUntil(t, 30*time.Second, "the client to connect again", cl.Connected)
				took = append(took, time.Since(answering))
			}
			slices.Sort(took)
			t.Logf("relay answering -> client connected over %d rounds: median %v, max %v (probe every %v; backoff 20 s)",
				len(took), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), DefaultProbeInterval)
			// The goal is 2 s; 5 s is half the shortest backoff wait, so
			// only the probes can meet it, with margin for a loaded machine.
			if worst := took[len(took)-1]; worst > 5*time.Second {
				t.Fatalf("connected %v after the relay answered again (all: %v)", worst, took)
			}
			box.Append(ctx, sessA, all[tc.rounds:])
			fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
			defer fcancel()
			if err := cl.Flush(fctx); err != nil {
				t.Fatal(err)
			}
			want := all
			if tc.startDown {
				want = all[tc.rounds:]
			}
			cancel()
			<-done
			r.halt()
			checkStored(t, sessA, r.ids(sessA), want)
		})
	}
}

// A relay that answers but refuses the connection is not hammered: the
// probes find it answering (its refusals say Retry-After, a proxy's 503
// does not), so attempts keep to the backoff, also once it would take the
// connection again (the cap no longer reached).
func TestRefusingRelayKeepsBackoff(t *testing.T) {
	refuse := func(w http.ResponseWriter, status int) {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many connections", status)
	}
	for _, tc := range []struct {
		name    string
		ws      func(w http.ResponseWriter)
		healthz func(w http.ResponseWriter, probe int64)
	}{
		{"refuses the websocket, /healthz answers", func(w http.ResponseWriter) {
			http.Error(w, "no", http.StatusServiceUnavailable)
		}, func(w http.ResponseWriter, _ int64) { w.Write([]byte("ok\n")) }},
		{"over its connection cap, then not", func(w http.ResponseWriter) { refuse(w, http.StatusServiceUnavailable) },
			func(w http.ResponseWriter, probe int64) {
				if probe <= 3 {
					refuse(w, http.StatusServiceUnavailable)
					return
				}
				w.Write([]byte("ok\n"))
			}},
		{"too many connections from the address, then not", func(w http.ResponseWriter) { refuse(w, http.StatusTooManyRequests) },
			func(w http.ResponseWriter, probe int64) {
				if probe <= 3 {
					refuse(w, http.StatusTooManyRequests)
					return
				}
				w.Write([]byte("ok\n"))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var attempts, probes atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/healthz" {
					tc.healthz(w, probes.Add(1))
					return
				}
				attempts.Add(1)
				tc.ws(w)
			}))
			defer srv.Close()
			box, err := OpenOutbox(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer box.Close()
			cl := NewClient(Config{URL: srv.URL, Token: token, MinBackoff: 20 * time.Second, MaxBackoff: 30 * time.Second,
				Logger: quiet}, box)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); cl.Run(ctx) }()
			defer func() { cancel(); <-done }()
			waitUntil(t, 30*time.Second, "seven probes", func() bool { return probes.Load() >= 7 })
			if n := attempts.Load(); n != 1 {
				t.Fatalf("%d connection attempts to a relay that refuses, within the first backoff wait (10 s at least): want 1", n)
			}
		})
	}
}

// A relay restarted faster than a probe can see it down (a new binary
// under systemd) after a connection that it took something on (envelopes;
// an announcement only, like an idle daemon's): the connection's end is a
// new outage, and the client connects again from the shortest backoff, not
// after the backoff a long outage before had grown (at least 6.4 s here).
func TestReconnectAfterQuickRestart(t *testing.T) {
	for _, what := range []string{"envelopes", "announcement"} {
		t.Run(what, func(t *testing.T) {
			r := newRelay(t)
			r.halt()
			box, err := OpenOutbox(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer box.Close()
			logs := failureLogs(t)
			cl := NewClient(Config{URL: "http://" + r.addr, Token: token, MinBackoff: 100 * time.Millisecond,
				MaxBackoff: 30 * time.Second, Logger: logs.logger()}, box)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); cl.Run(ctx) }()
			defer func() { cancel(); <-done }()
			// A long outage: the backoff grows to 6.4 s.
			waitLog(t, logs, "reconnecting", 7)
			r.start()
			waitUntil(t, 30*time.Second, "the client to connect", cl.Connected)
			if what == "envelopes" {
				box.Append(ctx, sessA, envs(sessA, 0, 1))
				fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
				defer fcancel()
				if err := cl.Flush(fctx); err != nil {
					t.Fatal(err)
				}
			} else {
				cl.Announce(sessA, []byte(`{"mode":"remote","status":"idle"}`))
				waitUntil(t, 30*time.Second, "the announcement to be acknowledged", func() bool {
					cl.mu.Lock()
					cn := cl.conn
					cl.mu.Unlock()
					return cn != nil && cn.tookSomething()
				})
			}
			before := strings.Count(logs.String(), "reconnecting")
			r.halt()
			r.start()
			restarted := time.Now()
			waitLog(t, logs, "reconnecting", before+1)
			waitUntil(t, 30*time.Second, "the client to connect again", cl.Connected)
			took := time.Since(restarted)
			t.Logf("relay restarted -> client connected: %v", took.Round(time.Millisecond))
			if took > 3*time.Second {
				t.Fatalf("connected %v after a quick restart", took)
			}
		})
	}
}
