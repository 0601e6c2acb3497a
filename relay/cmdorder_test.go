package relay

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// A CLI that claims a session while a prompt waits for it gets the prompts
// in the order the app sent them, also one the app sends after the claim
// and before the waiting prompt is handed over (here: as the apps are told
// of the announce). Before, that one went to the CLI at once, ahead of the
// older one: TestRemoteChaos saw Claude get p74 after p77 when the CLI came
// back as prompts arrived.
func TestQueuedCommandsBeforeNewOnes(t *testing.T) {
	r := startTestRelay(t)
	first := dial(t, r.srv, "/ws/cli")
	send(t, first, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(`{}`)})
	recv(t, first)
	first.Close(websocket.StatusNormalClosure, "")
	r.waitNoOwner(t)

	app := dial(t, r.srv, "/ws/app")
	statuses := make(chan protocol.Frame, 16)
	go func() { // ends with the connection
		for {
			_, b, err := app.Read(context.Background())
			if err != nil {
				close(statuses)
				return
			}
			var f protocol.Frame
			if json.Unmarshal(b, &f) == nil && f.Type == protocol.FrameStatus {
				statuses <- f
			}
		}
	}()
	prompt := func(id string) protocol.Frame {
		return protocol.Frame{Type: protocol.FrameCommand, Session: s1, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: id}}
	}
	// waitStatus waits for a status of id and returns it ("" past a deadline).
	waitStatus := func(id string) string {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case f, ok := <-statuses:
				if !ok {
					return ""
				}
				if f.Command != nil && f.Command.ID == id {
					return f.Status
				}
			case <-deadline:
				return ""
			}
		}
	}
	send(t, app, prompt("p1"))
	if s := waitStatus("p1"); s != protocol.StatusQueued {
		t.Fatalf("p1: %q, want queued", s)
	}

	// The next prompt comes while the new CLI has claimed the session and
	// the waiting one is not handed over yet.
	sent := make(chan string, 1)
	hook := func(session string) {
		if session != s1 {
			return
		}
		f := prompt("p2")
		f.V = protocol.FrameVersion
		b, _ := json.Marshal(f)
		if err := app.Write(context.Background(), websocket.MessageText, b); err != nil {
			sent <- err.Error()
			return
		}
		sent <- waitStatus("p2")
	}
	r.relay.shown.Store(&hook)
	cli := dial(t, r.srv, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Ref: "a", Session: s1, Info: json.RawMessage(`{"status":"idle"}`)})
	var got []string
	for len(got) < 2 {
		f := recv(t, cli)
		if f.Type == protocol.FrameCommand {
			got = append(got, f.Command.ID)
		}
	}
	r.relay.shown.Store(nil)
	if s := <-sent; s != protocol.StatusDelivered && s != protocol.StatusQueued {
		t.Fatalf("p2 sent during the claim: %q", s)
	}
	if !slices.Equal(got, []string{"p1", "p2"}) {
		t.Fatalf("the CLI got %q, want [p1 p2] (the order sent)", got)
	}
}
