package apiclient

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Attempt says how far the attempt to talk to a relay that does not answer
// got: nothing took the connection, the relay's machine took it and the
// relay did not answer the upgrade, or the relay accepted the websocket and
// answered nothing on it. What ccrelay says at exit comes from it.
func TestAttemptStages(t *testing.T) {
	var mu sync.Mutex
	var conns []net.Conn
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // never read, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		<-r.Context().Done()
	}))
	t.Cleanup(silent.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := "http://" + closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name, url string
		want      Stage
	}{
		{"nothing listening", nothing, StageNone},
		{"no HTTP answer", "http://" + ln.Addr().String(), StageTaken},
		{"websocket taken, no frame answered", silent.URL, StageUpgraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box, err := OpenOutbox(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer box.Close()
			box.Append(context.Background(), sessN, envs(sessN, 0, 3))
			logs := failureLogs(t)
			cl := NewClient(Config{URL: tc.url, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
				AnswerTimeout: time.Minute, Logger: logs.logger()}, box)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); cl.Run(ctx) }()
			defer func() { cancel(); <-done }()
			start := time.Now()
			var got Stage
			var since time.Time
			for {
				got, since = cl.Attempt()
				if got == tc.want && (got == StageNone) == since.IsZero() {
					break
				}
				if time.Since(start) > 20*time.Second {
					t.Fatalf("after %v the attempt stands at %d (since %v); want %d", time.Since(start), got, since, tc.want)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if tc.want == StageNone {
				// It stays there: let the client try a few times.
				deadline := time.Now().Add(300 * time.Millisecond)
				for time.Now().Before(deadline) {
					if got, _ := cl.Attempt(); got != StageNone {
						t.Fatalf("nothing listens, yet the attempt stands at %d", got)
					}
					time.Sleep(time.Millisecond)
				}
			}
			if cl.Connected() {
				t.Fatal("connected to a relay that does not answer")
			}
		})
	}
}
