package relay

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/coder/websocket"
)

// A relay that starts marks the sessions a CLI held when the relay before
// it stopped (and the working sessions and machines, which no list may
// show as running with nothing behind them), not every idle session of
// the store: a session that ended before (its CLI gone while no relay
// ran, or under a relay from before these marks) keeps its state, and is
// not listed as a machine offline. A session whose CLI closed its
// connection itself shortly before the relay stopped is marked as stopped,
// as the relay that stopped would have.
func TestCLIGoneRestartMarksOnlyHeld(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const (
		live    = "c0000000-0000-4000-8000-000000000001" // its CLI connected when the relay stops
		left    = "c0000000-0000-4000-8000-000000000002" // its CLI stopped just before
		ended   = "c0000000-0000-4000-8000-000000000003" // ended long ago, never marked
		busy    = "c0000000-0000-4000-8000-000000000004" // ended long ago while working
		machine = "c0000000-0000-4000-8000-000000000005" // a machine whose daemon is gone
	)
	idleInfo := `{"mode":"local","status":"idle"}`

	first := NewServer(st, quiet, testToken)
	first.Limits.CLIGoneAfter = time.Hour // nothing is marked while it runs
	addr, shut := serveServer(t, first)
	cli := dialAddr(t, addr, "/ws/cli")
	announce := func(c *websocket.Conn, id, info string) {
		t.Helper()
		send(t, c, protocol.Frame{Type: protocol.FrameAnnounce, Session: id, Info: json.RawMessage(info)})
		if f := recv(t, c); f.Type != protocol.FrameAck {
			t.Fatalf("announce %s answered %+v", id, f)
		}
	}
	announce(cli, live, idleInfo)
	owner, err := st.OwnerOf(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	// Sessions of earlier days, in the store as a relay from before left
	// them: no CLI holds them, none is marked.
	for id, info := range map[string]string{
		ended:   idleInfo,
		busy:    `{"mode":"remote","status":"busy"}`,
		machine: `{"mode":"machine","status":"idle","machine":"box","daemon":{"os":"linux","folders":[],"running":["` + busy + `"]}}`,
	} {
		if err := st.Claim(ctx, id, owner); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Announce(ctx, id, json.RawMessage(info)); err != nil {
			t.Fatal(err)
		}
	}
	stopping := dialAddr(t, addr, "/ws/cli")
	announce(stopping, left, idleInfo)
	stopping.Close(websocket.StatusNormalClosure, "")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		first.gone.mu.Lock()
		_, pending := first.gone.pending[left]
		first.gone.mu.Unlock()
		if pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay never saw the CLI stop")
		}
	}
	shut()

	second := NewServer(st, quiet, testToken)
	second.Limits.CLIGoneAfter = 300 * time.Millisecond
	serveServer(t, second)
	swept := make(chan struct{})
	go func() { defer close(swept); second.gone.wg.Wait() }() // the start's sweep, its only watcher
	select {
	case <-swept:
	case <-time.After(30 * time.Second):
		t.Fatal("the start's sweep never ended")
	}

	list, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, si := range list {
		var m map[string]any
		if err := json.Unmarshal(si.Info, &m); err != nil {
			t.Fatal(err)
		}
		got[si.ID] = m
	}
	if m := got[live]; m["cliGone"] == nil || m["cliStopped"] != nil || m["status"] != "idle" {
		t.Errorf("the session whose CLI was connected when the relay stopped: %v; want marked, not as stopped", m)
	}
	if m := got[left]; m["cliGone"] == nil || m["cliStopped"] != true {
		t.Errorf("the session whose CLI stopped before the relay did: %v; want marked as stopped", m)
	}
	if m := got[ended]; m["cliGone"] != nil || m["status"] != "idle" || m["error"] != nil {
		t.Errorf("the session that ended long ago: %v; want it as it was", m)
	}
	if m := got[busy]; m["cliGone"] == nil || m["status"] != "idle" || m["error"] != CLIGoneWorking {
		t.Errorf("the session left working: %v; want idle with the reason", m)
	}
	if m := got[machine]; m["cliGone"] == nil || m["error"] != CLIGoneMachine {
		t.Errorf("the machine: %v; want its daemon not connected", m)
	}
}
