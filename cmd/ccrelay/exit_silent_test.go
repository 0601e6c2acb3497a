package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A relay that never answers does not hold ccrelay up: at exit it waits
// exitFlushTimeout for what is unsent, says it was not sent and where it
// is kept, and exits, whether the relay takes no connection at all (a
// TCP accept and nothing more: no HTTP answer) or takes the websocket and
// then answers nothing. What it says is what happened: the relay took the
// connection and did not answer it, or answered nothing on its websocket
// (not that it "was not reached"), or nothing took the connection.
func TestExitRelayNeverAnswers(t *testing.T) {
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
		<-r.Context().Done() // its frames are never read
	}))
	t.Cleanup(silent.Close)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := "http://" + closed.Addr().String()
	closed.Close() // nothing listens there

	// What the exit says happened: the relay was reached (it took the
	// connection) and did not answer, or it was not reached at all.
	for _, tc := range []struct{ name, url, says, not string }{
		{"no HTTP answer", "http://" + ln.Addr().String(),
			"the relay at http://" + ln.Addr().String() + " took the connection but did not answer it", "not reached"},
		{"websocket taken, no frame answered", silent.URL,
			"the relay at " + silent.URL + " accepted the websocket but answered nothing on it", "not reached"},
		{"nothing listening", nothing,
			"cannot reach the relay at " + nothing, "took the connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const session = "11111111-2222-4333-8444-555555555556"
			r := newLocalRun(t, recLines(0, 20), map[string]any{"intervalMs": 10})
			cmd := r.command("--relay", tc.url, "--session-id", session)
			cmd.Env = append(cmd.Env, "CCRELAY_TOKEN=some-token")
			done := make(chan struct{})
			var out []byte
			var runErr error
			start := time.Now()
			go func() { defer close(done); out, runErr = cmd.CombinedOutput() }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill()
				<-done
				t.Fatalf("ccrelay still waiting after 2 minutes:\n%s", out)
			}
			took := time.Since(start)
			t.Logf("exited after %v", took.Round(time.Millisecond))
			if runErr != nil {
				t.Fatalf("ccrelay: %v\n%s", runErr, out)
			}
			// Claude's run and the wait at exit (exitFlushTimeout, 5 s):
			// generous for a loaded machine.
			if took > 45*time.Second {
				t.Errorf("ccrelay took %v to exit", took)
			}
			for _, want := range []string{"sending the last", "not sent: " + tc.says, "kept in "} {
				if !strings.Contains(string(out), want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
			_, said, _ := strings.Cut(string(out), "not sent: ")
			said, _, _ = strings.Cut(said, "\n")
			t.Logf("said: not sent: %s", said)
			if strings.Contains(said, tc.not) {
				t.Errorf("says %q:\n%s", tc.not, out)
			}
		})
	}
}
