package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// fakeRelay is a relay that reads every frame and acknowledges each after
// delay, or never when confirm is false (it takes the frames and answers
// pings: the connection is up, and nothing is confirmed).
func fakeRelay(t *testing.T, delay time.Duration, confirm bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var batches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ws.SetReadLimit(32 << 20)
		ctx := r.Context()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var f protocol.Frame
			if json.Unmarshal(b, &f) != nil || f.Ref == "" || !confirm {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			ack := protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameAck, Ref: f.Ref}
			for i, raw := range f.Envelopes {
				var e struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Errorf("envelope %d: %v", i, err)
					return
				}
				ack.Acks = append(ack.Acks, protocol.Ack{ID: e.ID, Seq: int64(i + 1)})
			}
			if f.Type == protocol.FrameEnvelopes {
				batches.Add(1)
			}
			out, _ := json.Marshal(ack)
			if ws.Write(ctx, websocket.MessageText, out) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &batches
}

// sendEnvelopes starts a sender to url and gives it n envelopes.
func sendEnvelopes(t *testing.T, url string, n int) *relaySender {
	t.Helper()
	const session = "66666666-6666-4666-8666-666666666666"
	var notice strings.Builder
	rs, err := startRelaySenderNotice(url, "some-token", t.TempDir(), session, discard, &notice, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := protocol.Envelope{ID: protocol.DeriveID(session, strconv.Itoa(i)), Time: int64(i + 1), Role: protocol.RoleUser,
			Ev: protocol.Event{T: protocol.KindText, Text: strings.Repeat("x", 200)}}
		if err := rs.emit(&e); err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

// A relay that takes the connection and confirms nothing is given up on
// once it has confirmed nothing for the bound (here 1 s, replay's is
// replayStall), and the error says so and that the envelopes stay on disk.
func TestFinishGivesUpOnSilentRelay(t *testing.T) {
	srv, _ := fakeRelay(t, 0, false)
	rs := sendEnvelopes(t, srv.URL, 50)
	start := time.Now()
	err := rs.finish(context.Background(), time.Second)
	took := time.Since(start)
	t.Logf("gave up after %v: %v", took.Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("a relay that confirms nothing: no error")
	}
	for _, want := range []string{"confirmed nothing for 1s", "stay on disk"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if took < time.Second || took > 30*time.Second {
		t.Errorf("gave up after %v; want about 1s", took)
	}
}

// A relay that confirms slowly but steadily is waited for as long as it
// takes, also longer in all than the bound: only a relay that confirms
// nothing for the bound is given up on. Without the fix the bound was the
// whole wait, and a large replay to a slow relay failed part way.
func TestFinishWaitsForSlowRelay(t *testing.T) {
	const delay = 150 * time.Millisecond
	srv, batches := fakeRelay(t, delay, true)
	rs := sendEnvelopes(t, srv.URL, 3000) // several batches (at most 200 envelopes each)
	start := time.Now()
	err := rs.finish(context.Background(), time.Second)
	took := time.Since(start)
	t.Logf("%d batches confirmed in %v", batches.Load(), took.Round(time.Millisecond))
	if err != nil {
		t.Fatalf("gave up on a relay that confirmed a batch every %v: %v", delay, err)
	}
	if took <= time.Second {
		t.Fatalf("took %v: no longer in all than the bound, the test shows nothing", took)
	}
}
