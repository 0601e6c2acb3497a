package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// An app connection has at most MaxHistoryReads reads of history under
// way: the subscribes beyond are answered busy (with their ref) and start
// nothing, and once the reads end the same subscribe is served.
func TestHistoryReadsBounded(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	ctx := context.Background()
	if err := st.Claim(ctx, s1, OwnerID(testToken)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, s1, groupItems(s1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	rs := NewServer(st, slog.New(slog.DiscardHandler), testToken)
	started, release := make(chan struct{}, 64), make(chan struct{})
	rs.historyHook = func() { started <- struct{}{}; <-release }
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	r := &testRelay{srv: srv, relay: rs, store: st}
	app := r.dial(t, testToken, "/ws/app")

	const extra = 3
	for i := range MaxHistoryReads + extra {
		f := protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, Ref: fmt.Sprint("r", i), Before: 3}
		if i == MaxHistoryReads+extra-1 {
			f.Before = 0 // a whole subscription counts too
		}
		send(t, app, f)
	}
	for i := range MaxHistoryReads {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d reads of history started, want %d", i, MaxHistoryReads)
		}
	}
	for i := range extra {
		f := recv(t, app)
		if want := fmt.Sprint("r", MaxHistoryReads+i); f.Type != protocol.FrameError || f.Code != "busy" || f.Ref != want || f.Session != s1 {
			t.Fatalf("subscribe %d of %d answered %+v, want busy with ref %s", MaxHistoryReads+i+1, MaxHistoryReads+extra, f, want)
		}
	}
	select {
	case <-started:
		t.Fatal("a read of history started beyond the bound")
	default:
	}
	close(release)
	released = true
	for range MaxHistoryReads {
		if f := recvType(t, app, protocol.FrameCaughtUp, protocol.FrameError); f.Type != protocol.FrameCaughtUp {
			t.Fatalf("%+v", f)
		}
	}
	// A slot is free again: the same subscribe is served.
	send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, Ref: "again", Before: 3})
	if f := recvType(t, app, protocol.FrameCaughtUp, protocol.FrameError); f.Type != protocol.FrameCaughtUp || f.Seq != 2 {
		t.Fatalf("the subscribe sent again: %+v", f)
	}
}

// A catch-up comes in large frames (up to historyFrameBytes of envelopes,
// read with one query each, not 500 envelopes a frame), every envelope
// once and in order, each frame under the frame limit even with envelopes
// of a megabyte and more; a part of history (before) stops where it says.
func TestHistoryFrames(t *testing.T) {
	r := startTestRelay(t)
	ctx := context.Background()
	if err := r.store.Claim(ctx, s1, OwnerID(testToken)); err != nil {
		t.Fatal(err)
	}
	const small = 3000
	for i := 0; i < small; i += 1000 {
		if _, err := r.store.Append(ctx, s1, groupItems(s1, i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	var large []Item
	for i := range 5 {
		id := protocol.DeriveID(s1, "large", fmt.Sprint(i))
		large = append(large, Item{ID: id, Body: fmt.Appendf(nil, `{"id":%q,"time":1,"role":"user","ev":{"t":"text","text":"%s"}}`, id, strings.Repeat("x", 3<<20/2))})
	}
	if _, err := r.store.Append(ctx, s1, large); err != nil {
		t.Fatal(err)
	}
	const total = small + 5
	for _, tc := range []struct {
		name          string
		before        int64
		want, wantMax int // envelopes, frames at most
	}{
		{"subscribe", 0, total, 5},
		{"before", small + 2, small + 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := r.dial(t, testToken, "/ws/app")
			send(t, app, protocol.Frame{Type: protocol.FrameSubscribe, Session: s1, Before: tc.before})
			frames, next := 0, int64(1)
			for {
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, b, err := app.Read(rctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if len(b) > MaxFrameBytes {
					t.Fatalf("a frame of %d bytes", len(b))
				}
				var f protocol.Frame
				if err := json.Unmarshal(b, &f); err != nil {
					t.Fatal(err)
				}
				if f.Type == protocol.FrameCaughtUp {
					break
				}
				if f.Type != protocol.FrameBatch {
					continue
				}
				frames++
				for _, it := range f.Items {
					if it.Seq != next {
						t.Fatalf("seq %d, want %d", it.Seq, next)
					}
					next++
				}
			}
			if got := int(next - 1); got != tc.want || frames > tc.wantMax {
				t.Fatalf("%d envelopes in %d frames, want %d in at most %d", got, frames, tc.want, tc.wantMax)
			}
			t.Logf("%d envelopes in %d frames", next-1, frames)
		})
	}
}
