package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// A relay (its operator, or a thief of its machine) can send a machine any
// frame. Commands it makes up are refused, and what the client keeps and
// logs of them stays small: command ids and sessions of any length were
// kept whole (up to 1,024 replies to send of up to the 16 MiB frame each)
// and logged whole, one line per frame. Now such a command is dropped,
// and the log says the first ten refusals of a connection, then every
// thousandth.
func TestHostileRelayCommandsStaySmall(t *testing.T) {
	const (
		junk   = 300       // made-up commands
		idSize = 64 << 10  // the id of each
		logMax = 200 << 10 // what the log may take of them all
	)
	sent := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ws.SetReadLimit(-1)
		// Reads (and so answers pings) but never replies to a request.
		ctx, stop := context.WithCancel(r.Context())
		defer stop()
		go func() {
			defer stop()
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
			}
		}()
		write := func(f protocol.Frame) bool {
			b, _ := json.Marshal(f)
			return ws.Write(ctx, websocket.MessageText, b) == nil
		}
		for i := range junk {
			id := strings.Repeat(string(rune('a'+i%26)), idSize)
			if !write(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: sessS,
				Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Sealed: "AAAA"}}) {
				return
			}
		}
		// Last, one of a command's usual size: once it is refused, every
		// frame before it was read.
		if !write(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: sessS,
			Command: &protocol.Command{ID: "zlastone", Kind: protocol.CommandPrompt, Sealed: "AAAA"}}) {
			return
		}
		select {
		case <-sent:
		default:
			close(sent)
		}
		<-ctx.Done()
	}))
	defer srv.Close()
	box, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	var logs logRecords
	cl := NewClient(Config{URL: srv.URL, Token: token, MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Logger: logs.logger()}, box)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(ctx) }()
	defer func() { cancel(); <-done }()

	select {
	case <-sent:
	case <-time.After(time.Minute):
		var lines []string
		for _, l := range strings.Split(logs.String(), "\n") {
			lines = append(lines, l[:min(len(l), 200)])
		}
		t.Fatalf("the client did not read the relay's frames; log:\n%s", strings.Join(lines, "\n"))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		cl.mu.Lock()
		_, last := cl.unsent[sessS+"/zlastone"]
		kept := 0
		for k, f := range cl.unsent {
			kept += len(k) + len(f.Command.ID) + len(f.Session) + len(f.Message)
		}
		n := len(cl.unsent)
		cl.mu.Unlock()
		if last {
			if kept > 64<<10 {
				t.Errorf("the client keeps %d bytes of %d replies to made-up commands", kept, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the usual command sent last was not refused (%d replies kept)", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if l := len(logs.String()); l > logMax {
		t.Errorf("the log took %d bytes of %d made-up commands (want at most %d)", l, junk+1, logMax)
	}
	if !strings.Contains(logs.String(), "dropped a command no app could send") {
		t.Errorf("the made-up commands are not logged at all")
	}
}
