package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// A prompt sent by an app before the CLI is online reaches the client's
// Commands once it announces the session; the client's Reply reaches the
// app as the command's status.
func TestClientReceivesCommands(t *testing.T) {
	r := newRelay(t)
	ctx := context.Background()
	app, _, err := websocket.Dial(ctx, "ws://"+r.addr+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.CloseNow()
	sendApp := func(f protocol.Frame) {
		f.V = protocol.FrameVersion
		b, _ := json.Marshal(f)
		if err := app.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	status := func() protocol.Frame {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, b, err := app.Read(rctx)
		if err != nil {
			t.Fatal(err)
		}
		var f protocol.Frame
		json.Unmarshal(b, &f)
		return f
	}
	// The session exists: its CLI announced it once and went away.
	first, _ := OpenOutbox(t.TempDir())
	defer first.Close()
	once := runClient(Config{URL: "http://" + r.addr, Token: token, MinBackoff: 10 * time.Millisecond}, first)
	once.cl.Announce(sessS, json.RawMessage(`{"mode":"local","status":"idle"}`))
	first.Append(ctx, sessS, envs(sessS, 0, 1))
	once.finish(t)

	// waitStatus reads statuses until want.
	waitStatus := func(want string) {
		t.Helper()
		for {
			f := status()
			if f.Type != protocol.FrameStatus {
				t.Fatalf("%+v", f)
			}
			if f.Status == want {
				return
			}
		}
	}
	sendApp(protocol.Frame{Type: protocol.FrameCommand, Session: sessS, Command: &protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "run the tests"}})
	// Queued; or, if the first CLI's connection was still closing,
	// delivered to it (it stays delivered, and the next CLI gets it again).
	st1 := status()
	if st1.Type != protocol.FrameStatus || (st1.Status != protocol.StatusQueued && st1.Status != protocol.StatusDelivered) {
		t.Fatalf("%+v", st1)
	}

	box, _ := OpenOutbox(t.TempDir())
	defer box.Close()
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, MinBackoff: 10 * time.Millisecond}, box)
	defer rc.cancel()
	rc.cl.Announce(sessS, json.RawMessage(`{"mode":"local","status":"idle"}`))
	var in Inbound
	select {
	case in = <-rc.cl.Commands():
	case <-time.After(10 * time.Second):
		t.Fatal("queued prompt not delivered to the client")
	}
	if in.Session != sessS || in.Command.ID != "p1" || in.Command.Text != "run the tests" {
		t.Fatalf("inbound %+v", in)
	}
	if st1.Status == protocol.StatusQueued {
		waitStatus(protocol.StatusDelivered)
	}
	if err := rc.cl.Reply(ctx, sessS, "p1", true, ""); err != nil {
		t.Fatal(err)
	}
	waitStatus(protocol.StatusDone)
	// Envelopes still flow on the same connection.
	if err := box.Append(ctx, sessS, envs(sessS, 1, 10)); err != nil {
		t.Fatal(err)
	}
	rc.finish(t)
	r.halt()
	checkStored(t, sessS, r.ids(sessS), envs(sessS, 0, 10))
}

// Live frames (token deltas) reach the apps watching the session; they
// are not stored.
func TestClientLive(t *testing.T) {
	r := newRelay(t)
	ctx := context.Background()
	box, _ := OpenOutbox(t.TempDir())
	defer box.Close()
	rc := runClient(Config{URL: "http://" + r.addr, Token: token, MinBackoff: 10 * time.Millisecond}, box)
	defer rc.cancel()
	rc.cl.Announce(sessS, json.RawMessage(`{"mode":"remote","status":"busy"}`))
	box.Append(ctx, sessS, envs(sessS, 0, 1))
	if err := rc.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	app, _, err := websocket.Dial(ctx, "ws://"+r.addr+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.CloseNow()
	b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameSubscribe, Session: sessS})
	if err := app.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	got := make(chan protocol.Frame, 16)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() {
		for {
			_, b, err := app.Read(rctx)
			if err != nil {
				close(got)
				return
			}
			var f protocol.Frame
			json.Unmarshal(b, &f)
			got <- f
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case f, ok := <-got:
			if !ok {
				t.Fatal("no live frame")
			}
			if f.Type == protocol.FrameLive {
				if f.Session != sessS || string(f.Payload) != `{"type":"delta","text":"hel"}` {
					t.Fatalf("live frame %+v", f)
				}
				if ids := r.ids(sessS); len(ids) != 1 {
					t.Fatalf("live frame stored: %v", ids)
				}
				return
			}
		case <-tick.C:
			// Sent until the app is subscribed: live frames are dropped,
			// not queued, for apps that are not watching.
			rc.cl.Live(sessS, json.RawMessage(`{"type":"delta","text":"hel"}`))
		}
	}
}

// Replies that could not be sent are kept to send again, at most
// MaxUnsentReplies of them.
func TestUnsentRepliesBounded(t *testing.T) {
	c := NewClient(Config{URL: "http://127.0.0.1:1"}, nil)
	for i := range MaxUnsentReplies + 5 {
		if err := c.Reply(context.Background(), "s", fmt.Sprint("c", i), true, ""); err == nil {
			t.Fatal("a reply while not connected succeeded")
		}
	}
	c.mu.Lock()
	n := len(c.unsent)
	c.mu.Unlock()
	if n != MaxUnsentReplies {
		t.Fatalf("%d replies kept, want %d", n, MaxUnsentReplies)
	}
}
