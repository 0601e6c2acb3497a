package relay

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// GET /status tells the states an app must tell apart: 401 for a refused
// credential, 200 for a reachable relay, and for a session of the token
// whether its CLI is connected now.
func TestStatus(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	srv := httptest.NewServer(NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken, "other-token").Handler())
	defer srv.Close()
	cli := dial(t, srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: a1, Envelopes: envelopes(a1, 0, 1)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("%+v", f)
	}
	get := func(t *testing.T, token, query string) (int, statusAnswer) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/status"+query, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a statusAnswer
		if resp.StatusCode != http.StatusUnauthorized {
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("%s: content type %q", query, ct)
			}
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		}
		return resp.StatusCode, a
	}
	yes, no := true, false
	for _, tc := range []struct {
		name, token, query string
		code               int
		cli                *bool
	}{
		{"no token", "", "", http.StatusUnauthorized, nil},
		{"wrong token", "wrong", "", http.StatusUnauthorized, nil},
		{"wrong token with a session", "wrong", "?session=" + a1, http.StatusUnauthorized, nil},
		{"reachable", testToken, "", http.StatusOK, nil},
		{"session with its CLI", testToken, "?session=" + a1, http.StatusOK, &yes},
		{"session of another token", "other-token", "?session=" + a1, http.StatusNotFound, nil},
		{"unknown session", testToken, "?session=a11ce001-0000-4000-8000-0000000000ff", http.StatusNotFound, nil},
		{"not a session id", testToken, "?session=nope", http.StatusBadRequest, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, a := get(t, tc.token, tc.query)
			if code != tc.code {
				t.Fatalf("status %d, want %d", code, tc.code)
			}
			if code == http.StatusOK && !a.OK || code != http.StatusOK && a.OK {
				t.Fatalf("ok %v with status %d", a.OK, code)
			}
			if (a.CLI == nil) != (tc.cli == nil) || a.CLI != nil && *a.CLI != *tc.cli {
				t.Fatalf("cli %v, want %v", a.CLI, tc.cli)
			}
		})
	}
	// The CLI leaves: its session's CLI is no longer connected.
	cli.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, a := get(t, testToken, "?session="+a1)
		if a.CLI != nil && *a.CLI == no {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session's CLI still shows connected after it left: %+v", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An app that asks for heartbeats (?heartbeat=1) gets a heartbeat frame
// every HeartbeatInterval; when its path goes dead (nothing passes, no FIN)
// the relay closes it within HeartbeatInterval + HeartbeatDeadline.
func TestHeartbeat(t *testing.T) {
	srv := startRelay(t)
	p := testutil.StartFaultProxy(t, strings.TrimPrefix(srv.URL, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+p.Addr+"/ws/app?heartbeat=1", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	// Reading answers the relay's pings.
	frames := make(chan []byte)
	readDone := make(chan struct{})
	go func() { // owned by the test: ends when c is closed
		defer close(readDone)
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			frames <- b
		}
	}()
	defer func() { c.CloseNow(); <-readDone }()
	start := time.Now()
	for i := range 2 {
		select {
		case b := <-frames:
			if string(b) != `{"v":1,"type":"heartbeat"}` {
				t.Fatalf("frame %s", b)
			}
		case <-time.After(HeartbeatInterval + 2*time.Second):
			t.Fatalf("no heartbeat %d within %v", i+1, HeartbeatInterval+2*time.Second)
		}
	}
	if el := time.Since(start); el < HeartbeatInterval {
		t.Fatalf("two heartbeats in %v, sooner than every %v", el, HeartbeatInterval)
	}
	if n := p.OpenTo("/ws/app"); n != 1 {
		t.Fatalf("%d app connections through the proxy", n)
	}
	p.Blackhole()
	dead := time.Now()
	limit := HeartbeatInterval + HeartbeatDeadline + 2*time.Second
	for p.OpenTo("/ws/app") > 0 {
		if time.Since(dead) > limit {
			t.Fatalf("the relay still holds the dead app connection %v after its path died", time.Since(dead))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the relay closed a dead app connection %v after its path died", time.Since(dead).Round(time.Millisecond))
}
