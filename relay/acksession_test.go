package relay

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/protocol"
)

// After each batch stored, a listing app is told the session as the
// append committed it (head, prompt, last sequence number, last activity),
// the same values the CLI's list (GET /sessions) shows, and the ack path
// does not read the session's row again to say so.
func TestStoredBatchTellsCommittedSession(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	var clock atomic.Int64
	clock.Store(1795373975000)
	st.now = func() time.Time { return time.UnixMilli(clock.Load()) }
	srv := httptest.NewServer(NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken).Handler())
	t.Cleanup(srv.Close)
	cli := dial(t, srv, "/ws/cli")
	info := `{"cwd":"/w/p","title":"Fix the tests","mode":"remote","status":"busy"}`
	send(t, cli, protocol.Frame{Type: protocol.FrameAnnounce, Session: s1, Info: json.RawMessage(info)})
	if f := recv(t, cli); f.Type != protocol.FrameAck {
		t.Fatalf("announce reply %+v", f)
	}
	app := dial(t, srv, "/ws/app")
	send(t, app, protocol.Frame{Type: protocol.FrameList})
	if f := recv(t, app); f.Type != protocol.FrameSessions || len(f.Sessions) != 1 {
		t.Fatalf("list %+v", f)
	}
	listed := func() protocol.SessionSummary {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sessions", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var a sessionsAnswer
		if err := json.NewDecoder(res.Body).Decode(&a); err != nil || len(a.Sessions) != 1 {
			t.Fatalf("GET /sessions: %d sessions, %v", len(a.Sessions), err)
		}
		return a.Sessions[0]
	}
	reads := st.sessionReads.Load()
	for _, step := range []struct {
		from, to int
		at       int64
		lastSeq  int64
	}{
		{0, 3, 1795373976000, 3},
		{1, 5, 1795373977000, 5}, // two stored before, two new
		{5, 6, 1795373978000, 6},
	} {
		clock.Store(step.at)
		send(t, cli, protocol.Frame{Type: protocol.FrameEnvelopes, Session: s1, Envelopes: envelopes(s1, step.from, step.to)})
		if f := recv(t, cli); f.Type != protocol.FrameAck || len(f.Acks) != step.to-step.from || f.Acks[len(f.Acks)-1].Seq != step.lastSeq {
			t.Fatalf("ack %+v", f)
		}
		if got := st.sessionReads.Load() - reads; got != 0 {
			t.Errorf("batch %d..%d: the ack path read the session's row %d times", step.from, step.to, got)
		}
		var told protocol.SessionSummary
		for {
			f := recv(t, app)
			if f.Type == protocol.FrameSession && len(f.Sessions) == 1 && f.Sessions[0].ID == s1 {
				told = f.Sessions[0]
				break
			}
		}
		want := protocol.SessionSummary{ID: s1, Info: summaryInfo(json.RawMessage(info)), Prompt: "message 0", LastSeq: step.lastSeq, Updated: step.at}
		if string(told.Info) != string(want.Info) || !strings.Contains(string(told.Info), "Fix the tests") || told.Prompt != want.Prompt || told.LastSeq != want.LastSeq || told.Updated != want.Updated {
			t.Errorf("batch %d..%d: the app was told %+v (info %s), want %+v", step.from, step.to, told, told.Info, want)
		}
		reads = st.sessionReads.Load()
		if l := listed(); string(l.Info) != string(told.Info) || l.Prompt != told.Prompt || l.LastSeq != told.LastSeq || l.Updated != told.Updated {
			t.Errorf("batch %d..%d: GET /sessions shows %+v (info %s), the app was told %+v", step.from, step.to, l, l.Info, told)
		}
		if _, err := st.session(context.Background(), s1); err != nil {
			t.Fatal(err)
		}
		reads = st.sessionReads.Load()
	}
}
