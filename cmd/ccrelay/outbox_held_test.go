package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
)

// Envelopes an outbox kept for a relay that never got them wait for it
// when the next sender names another relay: the user is told (stderr) what
// waits for whom, and the other relay stores none of them, only its own.
func TestSenderTellsOfEnvelopesHeldForAnotherRelay(t *testing.T) {
	data, dir := t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	const other = "https://other-relay.example:8443/"
	const kept, mine = "44444444-4444-4444-8444-444444444444", "55555555-5555-4555-8555-555555555555"
	box, err := apiclient.OpenOutboxWith(dir, apiclient.OutboxOptions{Relay: other})
	if err != nil {
		t.Fatal(err)
	}
	env := func(session string, i int) protocol.Envelope {
		return protocol.Envelope{ID: protocol.DeriveID(session, fmt.Sprint(i)), Time: int64(i + 1), Role: protocol.RoleUser,
			Ev: protocol.Event{T: protocol.KindText, Text: "held " + session}}
	}
	if err := box.Append(t.Context(), kept, []protocol.Envelope{env(kept, 0), env(kept, 1)}); err != nil {
		t.Fatal(err)
	}
	box.Close()

	var notice bytes.Buffer
	rs, err := startRelaySenderNotice(base, token, dir, mine, discard, &notice, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := env(mine, 0)
	if err := rs.emit(&e); err != nil {
		t.Fatal(err)
	}
	if err := rs.finish(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if s := notice.String(); !strings.Contains(s, "2 envelopes recorded for the relay https://other-relay.example:8443 wait for it") {
		t.Fatalf("notice: %q", s)
	}
	st, err := relay.OpenStore(data + "/relay.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rows, _ := st.Read(context.Background(), kept, 0, 100); len(rows) != 0 {
		t.Fatalf("this relay stored %d envelopes recorded for another", len(rows))
	}
	if rows, _ := st.Read(context.Background(), mine, 0, 100); len(rows) != 1 {
		t.Fatalf("this relay stored %d of its own envelopes, want 1", len(rows))
	}
}
