package relay

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// A CLI whose first frame for a session claims it and then fails to be
// stored (the store refuses the batch or the announce) still gets the
// commands queued for the session, without waiting for an app to send
// another: the claim stands (its retry finds it made), so the hand-over
// that follows the first frame is the only one. Before, the queued prompt
// went to it only with the next command an app sent, and without one it
// waited forever.
func TestQueuedCommandsAfterFailedFirstFrame(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trigger string // makes the store fail the first frame
		first   protocol.Frame
	}{
		{
			name:    "batch",
			trigger: `CREATE TRIGGER fail_first BEFORE INSERT ON envelopes BEGIN SELECT RAISE(ABORT, 'injected append failure'); END`,
			first:   protocol.Frame{Type: protocol.FrameEnvelopes, Ref: "b", Session: s1, Envelopes: envelopes(s1, 0, 1)},
		},
		{
			name:    "announce",
			trigger: `CREATE TRIGGER fail_first BEFORE UPDATE OF info ON sessions BEGIN SELECT RAISE(ABORT, 'injected announce failure'); END`,
			first:   protocol.Frame{Type: protocol.FrameAnnounce, Ref: "b", Session: s1, Info: json.RawMessage(`{"status":"idle"}`)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := startTestRelay(t)
			old := dial(t, r.srv, "/ws/cli")
			send(t, old, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
			recv(t, old)
			old.Close(websocket.StatusNormalClosure, "")
			r.waitNoOwner(t)

			app := dial(t, r.srv, "/ws/app")
			send(t, app, protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "p1"}})
			if f := recvType(t, app, protocol.FrameStatus); f.Status != protocol.StatusQueued {
				t.Fatalf("p1: %q, want queued", f.Status)
			}

			if _, err := r.store.w.ExecContext(ctx, tc.trigger); err != nil {
				t.Fatal(err)
			}
			cli := dial(t, r.srv, "/ws/cli")
			send(t, cli, tc.first)
			if f := recvType(t, cli, protocol.FrameError, protocol.FrameAck); f.Type != protocol.FrameError || f.Ref != "b" {
				t.Fatalf("the first frame: %+v, want the store's error", f)
			}
			if _, err := r.store.w.ExecContext(ctx, `DROP TRIGGER fail_first`); err != nil {
				t.Fatal(err)
			}
			// No app sends anything more: the queued prompt comes all the
			// same (recv fails past its deadline).
			if f := recvType(t, cli, protocol.FrameCommand); f.Command.ID != "p1" {
				t.Fatalf("the CLI got command %q, want p1", f.Command.ID)
			}
		})
	}
}
