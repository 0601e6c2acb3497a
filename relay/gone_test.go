package relay

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// dialAddr opens a websocket to the relay at addr (serveLimited).
func dialAddr(t *testing.T, addr, path string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+path, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(MaxFrameBytes)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// A session whose CLI connection ends and does not come back within
// CLIGoneAfter is never left working in the lists: working or waiting for
// a permission answer, it becomes idle with the reason (sealed: its
// readable status and error); a machine's daemon is shown gone, running
// nothing; an idle session is marked too, its status and error kept (the
// list shows it without its machine); a session no ccrelay announced (no
// mode) or a recording is left as it is; a CLI back in time keeps its
// state, and a CLI back later replaces the mark with what it announces. A
// CLI that closed its connection itself (ccrelay stopped) is told apart
// from one whose connection was lost (cliStopped). The listing app hears
// each change.
func TestCLIGoneMarksTheList(t *testing.T) {
	const grace = 300 * time.Millisecond
	sealedText := strings.Repeat("QUJD", 15) // a sealed summary's size, in strict base64url
	s, addr := serveLimited(t, Limits{CLIGoneAfter: grace}, nil)
	ctx := context.Background()
	type want struct {
		status, errText string
		marked          bool
		stopped         bool // cliStopped
		noPermissions   bool
		running         int // a machine's running sessions (-1: not a machine)
	}
	cases := []struct {
		name    string
		session string
		info    string
		back    bool // the CLI comes back within the grace, announcing the same
		want    want
		lost    bool // the connection is lost (no close frame), not closed by the CLI
	}{
		{"working", "a0000000-0000-4000-8000-000000000001", `{"mode":"remote","status":"busy","cwd":"/w"}`, false,
			want{status: "idle", errText: CLIGoneWorking, marked: true, stopped: true, running: -1}, false},
		{"waiting for a permission", "a0000000-0000-4000-8000-000000000002",
			`{"mode":"remote","status":"waiting-for-permission","permissions":[{"id":"p1","tool":"Bash","input":{"command":"ls"}}]}`, false,
			want{status: "idle", errText: CLIGoneWorking, marked: true, noPermissions: true, running: -1}, true},
		{"sealed and working", "a0000000-0000-4000-8000-000000000003", `{"mode":"remote","status":"busy","sealed":"` + sealedText + `","error":"sealed:abcd"}`, false,
			want{status: "idle", errText: CLIGoneWorkingAs(""), marked: true, running: -1}, true},
		// A Codex session's reason names Codex; a sealed one's, whose
		// agent the relay cannot read, names no agent.
		{"Codex and working", "a0000000-0000-4000-8000-000000000010", `{"mode":"remote","status":"busy","agent":"codex","cwd":"/w"}`, false,
			want{status: "idle", errText: "ccrelay stopped relaying this session while Codex was working: its connection to the relay ended and did not come back (ccrelay stopped, or its machine is off or offline). What Codex did after that is not known here. Resume the session to go on.", marked: true, stopped: true, running: -1}, false},
		{"machine", "a0000000-0000-4000-8000-000000000004",
			`{"mode":"machine","status":"idle","machine":"box","daemon":{"os":"linux","folders":[],"running":["a0000000-0000-4000-8000-000000000001"]}}`, false,
			want{status: "idle", errText: CLIGoneMachine, marked: true, running: 0}, false},
		{"idle, its connection lost", "a0000000-0000-4000-8000-000000000005", `{"mode":"remote","status":"idle","error":"Claude stopped: exit 1"}`, false,
			want{status: "idle", errText: "Claude stopped: exit 1", marked: true, running: -1}, true},
		{"idle in local mode, ccrelay stopped", "a0000000-0000-4000-8000-000000000007", `{"mode":"local","status":"idle"}`, false,
			want{status: "idle", marked: true, stopped: true, running: -1}, false},
		{"followed and sealed, idle", "a0000000-0000-4000-8000-000000000008", `{"mode":"followed","status":"idle","sealed":"` + sealedText + `"}`, false,
			want{status: "idle", marked: true, running: -1}, true},
		{"no mode", "a0000000-0000-4000-8000-000000000009", `{"status":"idle"}`, false,
			want{status: "idle", running: -1}, false},
		{"a recording", "a0000000-0000-4000-8000-00000000000a", `{"mode":"remote","status":"idle","recording":true}`, false,
			want{status: "idle", running: -1}, false},
		{"back in time", "a0000000-0000-4000-8000-000000000006", `{"mode":"remote","status":"busy"}`, true,
			want{status: "busy", running: -1}, false},
	}
	app := dialAddr(t, addr, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	recv(t, app)
	var clis []*websocket.Conn
	for _, tc := range cases {
		cli := dialAddr(t, addr, "/ws/cli")
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: tc.session, Info: json.RawMessage(tc.info)})
		if f := recv(t, cli); f.Type != protocol.FrameAck {
			t.Fatalf("%s: announce answered %+v", tc.name, f)
		}
		clis = append(clis, cli)
	}
	closed := time.Now()
	for i, tc := range cases {
		if tc.lost {
			clis[i].CloseNow()
		} else {
			clis[i].Close(websocket.StatusNormalClosure, "")
		}
		if tc.back {
			cli := dialAddr(t, addr, "/ws/cli")
			send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: tc.session, Info: json.RawMessage(tc.info)})
			recv(t, cli)
		}
	}
	// The app hears each mark.
	heard := map[string]bool{}
	allHeard := func() bool {
		for _, tc := range cases {
			if tc.want.marked && !heard[tc.session] {
				return false
			}
		}
		return true
	}
	for !allHeard() {
		f := recv(t, app)
		for _, sum := range f.Sessions {
			if f.Type == protocol.FrameSession && json.Valid(sum.Info) && string(sum.Info) != "" {
				var m map[string]any
				json.Unmarshal(sum.Info, &m)
				if m["cliGone"] != nil {
					heard[sum.ID] = true
				}
			}
		}
	}
	if since := time.Since(closed); since < grace {
		t.Fatalf("marked %v after the CLIs left, before the grace of %v", since, grace)
	}
	for _, tc := range cases {
		si, err := s.store.session(ctx, tc.session)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(si.Info, &m)
		_, marked := m["cliGone"]
		errText, _ := m["error"].(string)
		if m["status"] != tc.want.status || marked != tc.want.marked || errText != tc.want.errText || (m["cliStopped"] == true) != tc.want.stopped {
			t.Errorf("%s: listed as %s", tc.name, si.Info)
		}
		if tc.want.noPermissions && m["permissions"] != nil {
			t.Errorf("%s: permission requests still listed: %s", tc.name, si.Info)
		}
		if tc.want.running >= 0 {
			d, _ := m["daemon"].(map[string]any)
			running, ok := d["running"].([]any)
			if !ok || len(running) != tc.want.running {
				t.Errorf("%s: the machine lists running %v", tc.name, d["running"])
			}
		}
		if tc.name == "sealed and working" && m["sealed"] != sealedText {
			t.Errorf("%s: the sealed part changed: %s", tc.name, si.Info)
		}
	}
	// A CLI back later: what it announces replaces the mark.
	cli := dialAddr(t, addr, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: cases[0].session, Info: json.RawMessage(cases[0].info)})
	recv(t, cli)
	si, _ := s.store.session(ctx, cases[0].session)
	var m map[string]any
	json.Unmarshal(si.Info, &m)
	if m["cliGone"] != nil || m["status"] != "busy" {
		t.Fatalf("after the CLI came back: %s", si.Info)
	}
}

// serveServer serves s the way `ccrelay serve` does and returns its address
// and a function that shuts it down (as a relay that stops).
func serveServer(t *testing.T, s *Server) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base, stop := context.WithCancel(context.Background())
	srv := s.HTTPServer(base)
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(s.Listener(ln)) }()
	var once sync.Once
	shut := func() {
		once.Do(func() {
			stop()
			srv.Close()
			<-served
			s.Wait()
		})
	}
	t.Cleanup(shut)
	return ln.Addr().String(), shut
}

// A relay that stops marks nothing (its CLIs come back to the next one);
// the next relay marks the sessions a CLI held when it stopped (working or
// idle), and the machines, when no CLI holds them within CLIGoneAfter of
// its start (the CLI died while no relay ran), and leaves alone a session
// whose CLI came back.
func TestCLIGoneAfterARelayRestart(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const dies, back, machine = "b0000000-0000-4000-8000-000000000001", "b0000000-0000-4000-8000-000000000002", "b0000000-0000-4000-8000-000000000003"
	const idle = "b0000000-0000-4000-8000-000000000004"
	infos := map[string]string{
		dies:    `{"mode":"remote","status":"busy"}`,
		idle:    `{"mode":"remote","status":"idle"}`,
		back:    `{"mode":"remote","status":"busy"}`,
		machine: `{"mode":"machine","status":"idle","machine":"box","daemon":{"os":"linux","folders":[],"running":["b0000000-0000-4000-8000-000000000001"]}}`,
	}
	first := NewServer(st, quiet, testToken)
	first.Limits.CLIGoneAfter = 200 * time.Millisecond
	addr, shut := serveServer(t, first)
	cli := dialAddr(t, addr, "/ws/cli")
	for id, info := range infos {
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: id, Info: json.RawMessage(info)})
		if f := recv(t, cli); f.Type != protocol.FrameAck {
			t.Fatalf("announce answered %+v", f)
		}
	}
	shut() // the relay stops, and its CLI's connection with it: its watchers end unmarked (Wait)
	status := func(id string) map[string]any {
		si, err := st.session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(si.Info, &m)
		return m
	}
	for id := range infos {
		if m := status(id); m["cliGone"] != nil {
			t.Fatalf("a relay that stopped marked %s: %v", id, m)
		}
	}

	second := NewServer(st, quiet, testToken)
	second.Limits.CLIGoneAfter = 500 * time.Millisecond
	started := time.Now()
	addr, _ = serveServer(t, second)
	cli = dialAddr(t, addr, "/ws/cli")
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: back, Info: json.RawMessage(infos[back])})
	recv(t, cli)
	for deadline := time.Now().Add(20 * time.Second); status(dies)["cliGone"] == nil || status(machine)["cliGone"] == nil || status(idle)["cliGone"] == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never marked: %v, %v, %v", status(dies), status(machine), status(idle))
		}
	}
	if since := time.Since(started); since < 500*time.Millisecond {
		t.Fatalf("marked %v after the start, before the grace", since)
	}
	if m := status(dies); m["status"] != "idle" || m["error"] != CLIGoneWorking {
		t.Fatalf("the session whose CLI died: %v", m)
	}
	if m := status(machine); m["error"] != CLIGoneMachine || len(m["daemon"].(map[string]any)["running"].([]any)) != 0 {
		t.Fatalf("the machine: %v", m)
	}
	// Why its CLI went is not known here: not said to have stopped.
	if m := status(idle); m["status"] != "idle" || m["error"] != nil || m["cliStopped"] != nil {
		t.Fatalf("the idle session whose CLI died: %v", m)
	}
	if m := status(back); m["status"] != "busy" || m["cliGone"] != nil {
		t.Fatalf("the session whose CLI came back: %v", m)
	}
}

// A CLI that connects, announces and leaves again and again (its token
// holder, or a flapping network) leaves one pending mark per session, not
// one watcher per connection: the watchers of the connections that ended
// within CLIGoneAfter are bounded by the sessions, not by how often they
// reconnect.
func TestCLIGoneWatchersBounded(t *testing.T) {
	const rounds = 200
	_, addr := serveLimited(t, Limits{CLIGoneAfter: time.Hour}, nil)
	const session = "c0000000-0000-4000-8000-000000000001"
	info := json.RawMessage(`{"mode":"remote","status":"busy"}`)
	connect := func() {
		cli := dialAddr(t, addr, "/ws/cli")
		send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: session, Info: info})
		if f := recv(t, cli); f.Type != protocol.FrameAck {
			t.Fatalf("announce answered %+v", f)
		}
		cli.Close(websocket.StatusNormalClosure, "")
	}
	settled := func(limit int) int {
		deadline := time.Now().Add(15 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= limit || time.Now().After(deadline) {
				return n
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	base := runtime.NumGoroutine()
	for range rounds {
		connect()
	}
	if n := settled(base + 20); n > base+20 {
		t.Fatalf("%d goroutines after %d connections of one session ended (%d before): a watcher per connection", n, rounds, base)
	}
}
