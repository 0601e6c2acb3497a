package relay

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
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
