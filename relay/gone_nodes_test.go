package relay

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/pgtest"
	"github.com/ccrelay/ccrelay/protocol"
)

// startNodeGone is startNode with a CLIGoneAfter of its own.
func startNodeGone(t *testing.T, url string, after time.Duration) *testRelay {
	t.Helper()
	return startNodeWith(t, url, func(rs *Server) { rs.Limits.CLIGoneAfter = after })
}

// Two relays on one PostgreSQL: a working session whose CLI leaves node A
// and comes back on node B within CLIGoneAfter is left as it is (A sees B
// holds it); one whose CLI comes back nowhere is marked by A, and B's
// listing app hears it.
func TestNodesCLIGone(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	const grace = 2 * time.Second // the CLI's move to node B fits in it on a loaded machine
	a, b := startNodeGone(t, url, grace), startNodeGone(t, url, grace)
	const moved, dead = "c0000000-0000-4000-8000-000000000001", "c0000000-0000-4000-8000-000000000002"
	busy := json.RawMessage(`{"mode":"remote","status":"busy"}`)
	app := b.dial(t, testToken, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	recvType(t, app, protocol.FrameSessions)

	cli := a.dial(t, testToken, "/ws/cli")
	for _, s := range []string{moved, dead} {
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s, Info: busy})
		if f := recv(t, cli); f.Type != protocol.FrameAck {
			t.Fatalf("announce: %+v", f)
		}
	}
	cli.CloseNow()
	back := b.dial(t, testToken, "/ws/cli")
	send(t, back, protocol.Frame{Type: protocol.FrameAnnounce, Session: moved, Info: busy})
	recv(t, back)

	for {
		f := recvType(t, app, protocol.FrameSession)
		if f.Sessions[0].ID == dead && strings.Contains(string(f.Sessions[0].Info), "cliGone") {
			break
		}
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(a.log.String(), "came back in time"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node A never looked at the session that moved:\n%s", a.log.String())
		}
	}
	si, err := a.store.session(context.Background(), moved)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(si.Info), "cliGone") || !strings.Contains(string(si.Info), `"busy"`) {
		t.Fatalf("the session whose CLI moved to node B: %s", si.Info)
	}
	si, _ = a.store.session(context.Background(), dead)
	if !strings.Contains(string(si.Info), CLIGoneWorking) {
		t.Fatalf("the session whose CLI is gone: %s", si.Info)
	}
}
