package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// perfBody is a stored envelope of a typical size (an agent's text).
func perfBody(session string, i int) (string, []byte) {
	id := protocol.DeriveID(session, fmt.Sprint(i))
	e := protocol.Envelope{ID: id, Time: 1795373975149 + int64(i), Role: protocol.RoleAgent, Turn: "ca5cb6281a9d7b15959b999f",
		Ev: protocol.Event{T: protocol.KindText, Text: "Done. The tool finished and the tests pass; next I will look at the flaky one."}}
	b, _ := e.AppendJSON(nil)
	return id, b
}

// BenchmarkSingleNode measures, in one run, the single relay against the
// database under it: raw modernc SQLite inserts of the same rows in the
// same table (WAL, synchronous=NORMAL, transactions of 100), the store's appends, and the
// whole relay (a CLI flooding batches of 100, one app and ten apps
// following), each as envelopes/s and as a ratio to the raw rate; and the
// bytes a stored envelope costs on disk against its JSON.
func BenchmarkSingleNode(b *testing.B) {
	const n = 20000
	session := s1
	rate := func(start time.Time) float64 { return n / time.Since(start).Seconds() }
	for b.Loop() {
		// Raw inserts.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		// The rows the store writes, in its table (migrate.go, version 6).
		db.Exec(`CREATE TABLE envelopes (k INTEGER PRIMARY KEY, sn INTEGER NOT NULL, id TEXT NOT NULL, body BLOB NOT NULL, UNIQUE (sn, id))`)
		start := time.Now()
		for i := 0; i < n; i += 100 {
			tx, _ := db.Begin()
			st, _ := tx.Prepare(`INSERT INTO envelopes (k, sn, id, body) VALUES (?, ?, ?, ?)`)
			for k := i; k < i+100; k++ {
				id, body := perfBody(session, k)
				if _, err := st.Exec(envelopeKey(1, int64(k+1)), 1, id, encodeBody(id, body)); err != nil {
					b.Fatal(err)
				}
			}
			st.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		raw := rate(start)
		db.Close()

		// The store.
		st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
		if err != nil {
			b.Fatal(err)
		}
		var jsonBytes int64
		start = time.Now()
		for i := 0; i < n; i += 100 {
			items := make([]Item, 100)
			for k := range items {
				id, body := perfBody(session, i+k)
				items[k] = Item{ID: id, Body: body}
				jsonBytes += int64(len(body))
			}
			if _, err := st.Append(context.Background(), session, items); err != nil {
				b.Fatal(err)
			}
		}
		store := rate(start)
		used := envelopeBytes(b, st)
		st.Close()

		// Real envelopes (the golden files' mix of tool calls, results
		// and text) on disk against their JSON.
		st, err = OpenStore(filepath.Join(b.TempDir(), "real.db"))
		if err != nil {
			b.Fatal(err)
		}
		real := goldenItems(b)
		var realBytes int64
		for i := 0; i < len(real); i += 100 {
			batch := real[i:min(i+100, len(real))]
			for _, it := range batch {
				realBytes += int64(len(it.Body))
			}
			if _, err := st.Append(context.Background(), session, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(envelopeBytes(b, st))/float64(realBytes), "disk/json-real")
		st.Close()

		b.ReportMetric(raw, "raw-insert/s")
		b.ReportMetric(store, "store-append/s")
		b.ReportMetric(store/raw, "store/raw")
		b.ReportMetric(float64(used)/float64(jsonBytes), "disk/json")
		for _, apps := range []int{1, 10} {
			st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(NewServer(st, slog.New(slog.DiscardHandler), testToken).Handler())
			got, _ := flood(b, srv.URL, srv.URL, apps, n, false)
			srv.Close()
			st.Close()
			b.ReportMetric(got, fmt.Sprintf("relay-%dapp/s", apps))
			b.ReportMetric(got/raw, fmt.Sprintf("relay-%dapp/raw", apps))
		}
	}
}

// envelopeBytes is the size of the database's pages in use.
func envelopeBytes(b *testing.B, st *Store) int64 {
	var used int64
	if err := st.w.QueryRowContext(context.Background(), `SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()`).Scan(&used); err != nil {
		b.Fatal(err)
	}
	return used
}

// BenchmarkSubscribeFrom0: an app subscribes from 0 to a session of
// 100,000 stored envelopes; the time until it is caught up.
func BenchmarkSubscribeFrom0(b *testing.B) {
	st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const n = 100000
	if err := st.Claim(context.Background(), s1, OwnerID(testToken)); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += 1000 {
		items := make([]Item, 1000)
		for k := range items {
			id, body := perfBody(s1, i+k)
			items[k] = Item{ID: id, Body: body}
		}
		if _, err := st.Append(context.Background(), s1, items); err != nil {
			b.Fatal(err)
		}
	}
	srv := httptestServer(b, NewServer(st, nil, testToken).Handler())
	ctx := context.Background()
	hdr := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}}
	for b.Loop() {
		c, _, err := websocket.Dial(ctx, "ws"+srv[len("http"):]+"/ws/app", hdr)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(MaxFrameBytes)
		f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameSubscribe, Session: s1})
		c.Write(ctx, websocket.MessageText, f)
		got := 0
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var fr protocol.Frame
			json.Unmarshal(data, &fr)
			got += len(fr.Items)
			if fr.Type == protocol.FrameError {
				b.Fatalf("subscribe: %s", fr.Message)
			}
			if fr.Type == protocol.FrameCaughtUp {
				break
			}
		}
		c.CloseNow()
		if got != n {
			b.Fatalf("%d envelopes before caught-up, want %d", got, n)
		}
	}
}

// BenchmarkList10k: the list frame with 10,000 sessions, each announced
// with a summary of the usual size.
func BenchmarkList10k(b *testing.B) {
	st := list10k(b)
	ctx := context.Background()
	srv := httptestServer(b, NewServer(st, nil, testToken).Handler())
	hdr := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}}
	c, _, err := websocket.Dial(ctx, "ws"+srv[len("http"):]+"/ws/app", hdr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameList})
	// The frame is checked once, whole; then only received, every byte,
	// into one buffer (what the relay does is what is measured, not the
	// test's decoding or its allocations: both share the relay's cores).
	c.Write(ctx, websocket.MessageText, f)
	_, data, err := c.Read(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var fr protocol.Frame
	if err := json.Unmarshal(data, &fr); err != nil || fr.Type != protocol.FrameSessions || len(fr.Sessions) != 10000 {
		b.Fatalf("list: %s %d sessions, %v", fr.Type, len(fr.Sessions), err)
	}
	buf := make([]byte, 64<<10)
	for b.Loop() {
		c.Write(ctx, websocket.MessageText, f)
		_, r, err := c.Reader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, r, buf)
		if err != nil || n != int64(len(data)) {
			b.Fatalf("list: %d bytes, %v; the first was %d", n, err, len(data))
		}
	}
}

// list10k is a store of 10,000 sessions of testToken's owner, each
// announced with a summary of the usual size.
func list10k(b *testing.B) *Store {
	b.Helper()
	st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	owner := OwnerID(testToken)
	for i := range 10000 {
		id := fmt.Sprintf("%08x-1111-4111-8111-111111111111", i)
		st.Claim(ctx, id, owner)
		info, _ := json.Marshal(map[string]any{"cwd": "/home/me/src/project-" + fmt.Sprint(i%50), "title": "Fix the flaky test in the relay", "machine": "laptop",
			"mode": "remote", "status": "idle", "model": "claude-sonnet-4", "permissionMode": "default", "costUsd": 0.42,
			"usage": map[string]any{"input_tokens": 1200, "output_tokens": 340}})
		st.Announce(ctx, id, summaryInfo(info))
	}
	return st
}

// BenchmarkListPage10k: the first page (50) of a list of 10,000 sessions,
// as an app asks for it over a websocket and receives it whole, against a
// raw SELECT of the same rows (the page's columns, the same order and
// limit) on the same store in the same run. Reports the page's frame size,
// ms per page, and the ratio to the raw SELECT; the goal is a page under
// 64 KB in under 10 ms.
func BenchmarkListPage10k(b *testing.B) {
	st := list10k(b)
	ctx := context.Background()
	owner := OwnerID(testToken)
	raw := func() int {
		rows, err := st.r.QueryContext(ctx, `SELECT id, info, owner, prompt, last_seq, updated_ms FROM sessions WHERE owner = ? ORDER BY updated_ms DESC, id LIMIT ?`, owner, 51)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var id, info, own, prompt string
			var last, upd int64
			if err := rows.Scan(&id, &info, &own, &prompt, &last, &upd); err != nil {
				b.Fatal(err)
			}
			n++
		}
		return n
	}
	srv := httptestServer(b, NewServer(st, nil, testToken).Handler())
	hdr := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}}
	c, _, err := websocket.Dial(ctx, "ws"+srv[len("http"):]+"/ws/app", hdr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameList, Limit: 50})
	c.Write(ctx, websocket.MessageText, f)
	_, data, err := c.Read(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var fr protocol.Frame
	if err := json.Unmarshal(data, &fr); err != nil || fr.Type != protocol.FrameSessions || len(fr.Sessions) != 50 || fr.Next == "" {
		b.Fatalf("list: %s %d sessions, next %q, %v", fr.Type, len(fr.Sessions), fr.Next, err)
	}
	if n := raw(); n != 51 {
		b.Fatalf("raw select: %d rows", n)
	}
	buf := make([]byte, 64<<10)
	var rawTime, pageTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		raw()
		t1 := time.Now()
		c.Write(ctx, websocket.MessageText, f)
		_, r, err := c.Reader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, r, buf)
		if err != nil || n != int64(len(data)) {
			b.Fatalf("list: %d bytes, %v; the first was %d", n, err, len(data))
		}
		rawTime += t1.Sub(t0)
		pageTime += time.Since(t1)
	}
	b.ReportMetric(float64(len(data)), "frame-bytes")
	b.ReportMetric(float64(pageTime.Microseconds())/1000/float64(b.N), "page-ms")
	b.ReportMetric(float64(rawTime.Microseconds())/1000/float64(b.N), "raw-ms")
	b.ReportMetric(float64(pageTime)/float64(rawTime), "page/raw")
}
