package main

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
)

// While pair waits for the device, a relay that stops answering is said,
// in Explain's words, instead of being asked again silently until the code
// expires (5 minutes); one that answers again soon (a restart) is waited
// for; a certificate this machine does not trust ends the wait at once.
// Without the fix every failure was ignored: each case ran out the
// context's deadline.
func TestWaitPairResultSaysRelayGone(t *testing.T) {
	old := pairUnreachable
	pairUnreachable = time.Second
	defer func() { pairUnreachable = old }()

	// A relay that answers "not redeemed yet" once, then is gone.
	var gone *httptest.Server
	gone = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		go gone.CloseClientConnections()
		go gone.Listener.Close()
	}))
	defer gone.Close()
	// A relay that cuts the first two requests, then answers.
	var asked atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) <= 2 {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.Write([]byte(`{"id":"d1","name":"phone"}`))
	}))
	defer flaky.Close()
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0)
	untrusted.StartTLS()
	defer untrusted.Close()

	for _, tc := range []struct {
		name, url string
		want      []string // in the error; none: the result
		within    time.Duration
		notices   int // lines said while waiting
	}{
		{"relay gone", gone.URL, []string{"cannot reach the relay at " + gone.URL, "connection refused", "is the relay running"}, 20 * time.Second, 1},
		{"relay back soon", flaky.URL, nil, 20 * time.Second, 2},
		{"certificate not trusted", untrusted.URL, []string{"cannot reach the relay at " + untrusted.URL, "not trusted by this machine"}, 5 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var said strings.Builder
			start := time.Now()
			res, err := waitPairResult(ctx, tc.url, "cred", "CODE", &said, func(pairResult) bool { return true })
			took := time.Since(start)
			t.Logf("after %v: %+v, %v\nsaid: %s", took.Round(time.Millisecond), res, err, said.String())
			if n := strings.Count(said.String(), "\n"); n != tc.notices {
				t.Errorf("said %d lines while waiting, want %d:\n%s", n, tc.notices, said.String())
			}
			if tc.notices > 0 && !strings.Contains(said.String(), "ccrelay: cannot reach the relay at "+tc.url) {
				t.Errorf("said %q while waiting; want why the relay cannot be reached", said.String())
			}
			for _, raw := range []string{"dial tcp", "x509:", "Get \"", "EOF"} {
				if strings.Contains(said.String(), raw) {
					t.Errorf("said %q while waiting: Go's raw error (%s)", said.String(), raw)
				}
			}
			if tc.want == nil {
				if err != nil || res.Name != "phone" {
					t.Fatalf("got %+v, %v; want the device", res, err)
				}
				return
			}
			var re *apiclient.ReachError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (after %v); want that the relay cannot be reached", err, took)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "dial tcp") || strings.Contains(err.Error(), "x509:") {
				t.Errorf("error %q: Go's raw error", err)
			}
			if took > tc.within {
				t.Errorf("said after %v; want within %v", took, tc.within)
			}
		})
	}
}
