package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// fakeSender is a relay client: commands in, answers recorded.
type fakeSender struct {
	in      chan apiclient.Inbound
	replies chan string // "id ok|message"
}

func (f *fakeSender) Commands() <-chan apiclient.Inbound { return f.in }
func (f *fakeSender) Announce(string, json.RawMessage)   {}
func (f *fakeSender) Live(string, json.RawMessage)       {}
func (f *fakeSender) Reply(_ context.Context, _, id string, ok bool, msg string) error {
	if ok {
		msg = "ok"
	}
	f.replies <- id + " " + msg
	return nil
}

// A command that arrives before the loop says which session it runs (the
// relay hands a CLI its session's queued prompts as soon as the outbox
// sends an earlier run's envelopes) waits for it: it reaches the loop, and
// is not refused as meant for another session. Seen in the crash walk: a
// restarted remote CLI refused the app's next prompt and the turn never came.
func TestAppLinkHoldsCommandsUntilSessionKnown(t *testing.T) {
	const session = "34343434-2222-4333-8444-555555555555"
	ledger, err := launcher.OpenLedger(filepath.Join(t.TempDir(), "commands.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	fs := &fakeSender{in: make(chan apiclient.Inbound, 1), replies: make(chan string, 4)}
	a := &appLink{sender: fs, ledger: ledger, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		cmds: make(chan launcher.Command), known: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.run(ctx) }()
	defer func() { cancel(); <-done }()

	fs.in <- apiclient.Inbound{Session: session, Command: protocol.Command{ID: "p1", Kind: protocol.CommandPrompt, Text: "two"}}
	// Nothing is taken, refused or answered before the session is known.
	select {
	case r := <-fs.replies:
		t.Fatalf("answered before the session was known: %s", r)
	case c := <-a.cmds:
		t.Fatalf("handed to the loop before the session was known: %+v", c.Command)
	case <-time.After(100 * time.Millisecond):
	}
	a.State(session, launcher.SessionState{Mode: "remote", Status: launcher.StatusIdle})
	select {
	case c := <-a.cmds:
		if c.Command.Text != "two" {
			t.Fatalf("the loop got %+v", c.Command)
		}
		c.Reply(nil)
	case r := <-fs.replies:
		t.Fatalf("refused: %s", r)
	case <-time.After(10 * time.Second):
		t.Fatal("the command never reached the loop")
	}
	if r := <-fs.replies; r != "p1 ok" {
		t.Fatalf("answer %q", r)
	}
	// A command for another session is refused once the session is known.
	fs.in <- apiclient.Inbound{Session: "44444444-2222-4333-8444-555555555555", Command: protocol.Command{ID: "p2", Kind: protocol.CommandPrompt, Text: "x"}}
	select {
	case r := <-fs.replies:
		if r == "p2 ok" {
			t.Fatalf("a command for another session was carried out")
		}
	case <-a.cmds:
		t.Fatal("a command for another session reached the loop")
	case <-time.After(10 * time.Second):
		t.Fatal("a command for another session was never answered")
	}
}
