package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// A relay that takes the connection and then never answers (its machine
// gone or asleep after the upgrade, a relay or a proxy stuck) is said at
// once, as a relay that cannot be reached, and then when it answers again.
// Before, only a failure to connect was said: the client waited 30 s for
// the reply to its first frame, silently, and connected again, silently,
// for as long as the relay took connections (a relay gone for good then
// needed the 10 s of a failed connection more: 40 s without a word).
func TestClientSaysWhenRelayDoesNotAnswer(t *testing.T) {
	var (
		mu     sync.Mutex
		answer bool              // the relay reads (and so answers pings) from now on
		conns  []*websocket.Conn // held open, unread, until the test ends
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		reads := answer
		conns = append(conns, ws)
		mu.Unlock()
		if reads {
			for {
				if _, _, err := ws.Read(r.Context()); err != nil {
					return
				}
			}
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	ctx := context.Background()
	box.Append(ctx, sessN, envs(sessN, 0, 3))
	var notices logRecords
	logs := failureLogs(t)
	cl := NewClient(Config{URL: srv.URL, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		AnswerTimeout: time.Second, Logger: logs.logger(), Notice: &notices}, box)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(rctx) }()
	defer func() { cancel(); <-done }()

	start := time.Now()
	waitNotice := func(s string) time.Duration {
		t.Helper()
		for !strings.Contains(notices.String(), s) {
			if time.Since(start) > 45*time.Second {
				t.Fatalf("after %v the user heard %q; want %q", time.Since(start).Round(time.Millisecond), notices.String(), s)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	took := waitNotice("cannot reach the relay at " + srv.URL)
	t.Logf("said after %v: %s", took.Round(time.Millisecond), notices.String())
	for _, w := range []string{"took the connection but did not answer within 1s", "retrying in the background"} {
		if !strings.Contains(notices.String(), w) {
			t.Errorf("the user heard %q; want it to say %q", notices.String(), w)
		}
	}
	if took > 20*time.Second {
		t.Errorf("said after %v; want about AnswerTimeout (1s)", took)
	}
	if strings.Contains(notices.String(), "reached the relay") {
		t.Errorf("said the relay was reached before it answered: %q", notices.String())
	}
	mu.Lock()
	answer = true
	mu.Unlock()
	waitNotice("reached the relay at " + srv.URL + " again")
	if n := strings.Count(notices.String(), "cannot reach"); n != 1 {
		t.Errorf("said %d times that the relay cannot be reached (once per outage): %q", n, notices.String())
	}
}

// A proxy in front of a relay that is down answers the connection with 502
// or 504: the user hears that the relay behind the proxy does not answer,
// not to check the relay's address. Without the fix: "it answered HTTP 502
// Bad Gateway instead of accepting the connection (is that the relay's
// address?)".
func TestClientSaysRelayBehindProxyIsDown(t *testing.T) {
	for _, status := range []int{http.StatusBadGateway, http.StatusGatewayTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
			}))
			defer proxy.Close()
			box, err := OpenOutbox(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer box.Close()
			var notices logRecords
			logs := failureLogs(t)
			cl := NewClient(Config{URL: proxy.URL, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
				Logger: logs.logger(), Notice: &notices}, box)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); cl.Run(ctx) }()
			defer func() { cancel(); <-done }()
			waitLog(t, &notices, "cannot reach the relay", 1)
			got := notices.String()
			want := "the proxy in front of it answered " + strconv.Itoa(status) + " " + http.StatusText(status) + ": the relay behind it does not answer"
			if !strings.Contains(got, want) || !strings.Contains(got, "is ccrelay serve running") {
				t.Errorf("the user heard %q; want it to say %q and the next step", got, want)
			}
			if strings.Contains(got, "is that the relay's address") {
				t.Errorf("the user heard %q: as if the address were wrong", got)
			}
		})
	}
}

// A relay that closes the connection at once answered, if badly: it is
// not said to have taken the connection without answering.
func TestClientRelayClosingAtOnceIsNotSilent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ws.Close(websocket.StatusGoingAway, "going away")
	}))
	defer srv.Close()
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	box.Append(context.Background(), sessN, envs(sessN, 0, 3))
	var notices, logs logRecords
	cl := NewClient(Config{URL: srv.URL, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger: logs.logger(), Notice: &notices}, box)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitLog(t, &logs, "reconnecting", 3)
	if got := notices.String(); strings.Contains(got, "did not answer") {
		t.Errorf("the user heard %q of a relay that closed the connection at once", got)
	}
}

// A relay that stops answering in the middle of a connection (its machine
// gone, a relay stuck on its store) is said within ReplyTimeout, as a
// relay that cannot be reached. Before, a reply
// that did not come was not said: the client connected again, and only a
// failure of that connection was said (30 s for the reply, 10 s more for
// the new connection: 40 s without a word).
func TestClientSaysWhenRelayStopsAnswering(t *testing.T) {
	var (
		mu    sync.Mutex
		stuck = false // the relay stops reading: no reply, no pong
		conns []*websocket.Conn
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, ws)
		mu.Unlock()
		for {
			mu.Lock()
			s := stuck
			mu.Unlock()
			if s {
				<-r.Context().Done()
				return
			}
			_, data, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			var f protocol.Frame
			if json.Unmarshal(data, &f) != nil {
				continue
			}
			reply := protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameAck, Ref: f.Ref}
			for i, e := range f.Envelopes {
				var id struct {
					ID string `json:"id"`
				}
				json.Unmarshal(e, &id)
				reply.Acks = append(reply.Acks, protocol.Ack{ID: id.ID, Seq: int64(i + 1)})
			}
			if f.Type == protocol.FrameEnvelopes {
				// This batch is taken; the relay then stops answering.
				mu.Lock()
				stuck = true
				mu.Unlock()
			}
			b, _ := json.Marshal(reply)
			ws.Write(r.Context(), websocket.MessageText, b)
		}
	}))
	defer srv.Close()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	ctx := context.Background()
	box.Append(ctx, sessN, envs(sessN, 0, 3))
	var notices logRecords
	logs := failureLogs(t)
	cl := NewClient(Config{URL: srv.URL, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		AnswerTimeout: 30 * time.Second, ReplyTimeout: 2 * time.Second, Logger: logs.logger(), Notice: &notices}, box)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(rctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for box.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first batch was never acknowledged")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	box.Append(ctx, sessN, envs(sessN, 3, 6))
	for !strings.Contains(notices.String(), "cannot reach the relay at "+srv.URL) {
		if time.Since(start) > 25*time.Second {
			t.Fatalf("after %v the user heard %q", time.Since(start).Round(time.Millisecond), notices.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("said after %v: %s", took.Round(time.Millisecond), notices.String())
	if !strings.Contains(notices.String(), "it stopped answering (no reply within 2s") {
		t.Errorf("the user heard %q; want that the relay stopped answering, with no reply within 2s", notices.String())
	}
}
