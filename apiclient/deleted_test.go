package apiclient

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/relay"
)

// A CLI that comes back with an outbox holding envelopes of a session
// deleted on the relay gets the deleted answer, drops them (the rest of the
// outbox is delivered), does not announce the session again, and the
// session does not come back.
func TestDeletedSessionDropped(t *testing.T) {
	r := newRelay(t)
	ctx := context.Background()
	owner := relay.OwnerID(token)
	if err := r.st.Claim(ctx, sessA, owner); err != nil {
		t.Fatal(err)
	}
	if err := r.st.DeleteSession(ctx, owner, sessA); err != nil {
		t.Fatal(err)
	}
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	a, b := envs(sessA, 0, 30), envs(sessB, 0, 30)
	for i := 0; i < 30; i += 10 {
		box.Append(ctx, sessA, a[i:i+10])
		box.Append(ctx, sessB, b[i:i+10])
	}
	cfg := Config{URL: "http://" + r.addr, Token: token, BatchSize: 5, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: quiet}
	cl := NewClient(cfg, box)
	cl.Announce(sessA, json.RawMessage(`{"cwd":"/w"}`))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cl.Run(runCtx) }()
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	err = cl.Flush(fctx)
	fcancel()
	cancel()
	<-done
	if err != nil {
		t.Fatalf("outbox not flushed (the deleted session's envelopes block it): %v", err)
	}
	if !cl.Deleted(sessA) || cl.Deleted(sessB) {
		t.Fatalf("Deleted: A %v, B %v", cl.Deleted(sessA), cl.Deleted(sessB))
	}
	if box.Pending() != 0 {
		t.Fatalf("pending %d", box.Pending())
	}
	r.halt()
	checkStored(t, sessB, r.ids(sessB), b)
	if got := r.ids(sessA); len(got) != 0 {
		t.Fatalf("deleted session resurrected with %d envelopes", len(got))
	}
	st, err := relay.OpenStore(r.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.OwnerOf(ctx, sessA); err == nil {
		t.Fatal("deleted session is back in the session list")
	}
}
