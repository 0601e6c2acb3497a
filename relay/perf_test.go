package relay

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
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

// realItems are n envelopes of the golden files' mix of tool calls,
// results, thinking and text (about 1 KB each on average), in order and
// again, each under an id of its own in session.
func realItems(tb testing.TB, session string, n int) []Item {
	tb.Helper()
	gold := goldenItems(tb)
	items := make([]Item, n)
	for i := range items {
		g := gold[i%len(gold)]
		id := protocol.DeriveID(session, strconv.Itoa(i))
		rest, ok := bytes.CutPrefix(g.Body, []byte(`{"id":"`+g.ID+`"`))
		if !ok {
			tb.Fatalf("golden envelope %s does not start with its id", g.ID)
		}
		items[i] = Item{ID: id, Body: append([]byte(`{"id":"`+id+`"`), rest...)}
	}
	return items
}

// BenchmarkSingleNode measures, in one run, the single relay against the
// database under it, with the same 20,000 real envelopes (realItems, about
// 1 KB each) in batches of 100: raw modernc SQLite inserts of the rows the
// store writes (encoded bodies) in the store's table, at the store's
// durability for envelopes (WAL, synchronous=FULL: fsynced at each
// commit), one transaction a batch; the store's appends; and the whole
// relay (a CLI sending batches as fast as acks come, one app and ten apps
// following), each as envelopes/s and as a ratio to the raw rate (in
// rounds taken in turn); the
// relay's CPU time per envelope stored and sent to one app, in a process
// of its own (relay-cpu-us/envelope: the relay's work alone, not the
// CLI's or the app's), against the CPU time of the raw inserts
// (raw-cpu-us/envelope: SQLite's own work for the same rows, which the
// relay cannot go below); and the bytes a stored envelope costs on disk
// against its JSON.
func BenchmarkSingleNode(b *testing.B) {
	const n, rounds = 20000, 5
	session := s1
	items := realItems(b, session, n)
	var jsonBytes int64
	for _, it := range items {
		jsonBytes += int64(len(it.Body))
	}
	// Each is measured in rounds of n/rounds envelopes, taken in turn
	// (the disk's fsyncs take longer or shorter as the machine's load
	// moves: each sees the same moments), on a database of its own.
	var rawCPU time.Duration // the process's CPU time in the raw rounds
	rawRound := func(part []Item) time.Duration {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		// The rows the store writes, in its table (envkey.go, version 11).
		if _, err := db.Exec(`CREATE TABLE envelopes (k INTEGER PRIMARY KEY, h INTEGER NOT NULL, id TEXT NOT NULL, body BLOB NOT NULL); CREATE INDEX envelopes_by_hash ON envelopes (h)`); err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), cpuTime()
		defer func() { rawCPU += cpuTime() - cpu0 }()
		for i := 0; i < len(part); i += 100 {
			tx, _ := db.Begin()
			st, _ := tx.Prepare(`INSERT INTO envelopes (k, h, id, body) VALUES (?, ?, ?, ?)`)
			for k := i; k < i+100; k++ {
				if _, err := st.Exec(envelopeKey(1, int64(k+1)), envelopeHash(1, part[k].ID), part[k].ID, encodeBody(part[k].ID, part[k].Body)); err != nil {
					b.Fatal(err)
				}
			}
			st.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var used int64
	storeRound := func(part []Item) time.Duration {
		st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		start := time.Now()
		for i := 0; i < len(part); i += 100 {
			if _, err := st.Append(context.Background(), session, part[i:i+100]); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(start)
		used += envelopeBytes(b, st)
		return d
	}
	relayRound := func(part []Item, apps int) time.Duration {
		st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		srv := httptest.NewServer(NewServer(st, slog.New(slog.DiscardHandler), testToken).Handler())
		defer srv.Close()
		got, _ := flood(b, srv.URL, srv.URL, apps, len(part), false, part)
		return time.Duration(float64(len(part)) / got * float64(time.Second))
	}
	for b.Loop() {
		var raw, store, relay1, relay10 time.Duration
		used, rawCPU = 0, 0
		for r := range rounds {
			part := items[r*n/rounds : (r+1)*n/rounds]
			raw += rawRound(part)
			store += storeRound(part)
			relay1 += relayRound(part, 1)
			relay10 += relayRound(part, 10)
		}
		rate := func(d time.Duration) float64 { return n / d.Seconds() }
		b.ReportMetric(rate(raw), "raw-insert/s")
		b.ReportMetric(rate(store), "store-append/s")
		b.ReportMetric(rate(store)/rate(raw), "store/raw")
		b.ReportMetric(float64(used)/float64(jsonBytes), "disk/json")
		b.ReportMetric(rate(relay1), "relay-1app/s")
		b.ReportMetric(rate(relay1)/rate(raw), "relay-1app/raw")
		b.ReportMetric(rate(relay10), "relay-10app/s")
		b.ReportMetric(rate(relay10)/rate(raw), "relay-10app/raw")

		// The relay's own CPU time, in a process of its own.
		p := startRelayProcess(b)
		before := p.stats(b)
		flood(b, "http://"+p.addr, "http://"+p.addr, 1, n, false, items)
		after := p.stats(b)
		b.ReportMetric(float64(after.cpu-before.cpu)/1e3/n, "relay-cpu-us/envelope")
		b.ReportMetric(float64(rawCPU.Nanoseconds())/1e3/n, "raw-cpu-us/envelope")
		b.ReportMetric(float64(after.cpu-before.cpu)/float64(rawCPU.Nanoseconds()), "relay-cpu/raw-cpu")
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
// 100,000 stored real envelopes (realItems, about 1 KB each); the time
// until it is caught up (every frame received whole, not decoded: the
// app's decoding is not the relay's work), against a raw SELECT of the
// same rows (their key, id and stored body, in order) on the same store in
// the same run: catchup/raw.
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
	items := realItems(b, s1, n)
	for i := 0; i < n; i += 1000 {
		if _, err := st.Append(context.Background(), s1, items[i:i+1000]); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	raw := func() int {
		rows, err := st.r.QueryContext(ctx, `SELECT e.k, e.id, e.body FROM sessions s, envelopes e
			WHERE s.id = ? AND e.k > s.no * 4294967296 AND e.k <= s.no * 4294967296 + 4294967295 ORDER BY e.k`, s1)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		got := 0
		var k int64
		var id string
		var body []byte
		for rows.Next() {
			if err := rows.Scan(&k, &id, &body); err != nil {
				b.Fatal(err)
			}
			got++
		}
		return got
	}
	srv := httptestServer(b, NewServer(st, nil, testToken).Handler())
	hdr := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}}
	f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameSubscribe, Session: s1})
	var rawTime, catchup time.Duration
	var frames, bytesIn int
	for b.Loop() {
		t0 := time.Now()
		if got := raw(); got != n {
			b.Fatalf("raw select: %d rows, want %d", got, n)
		}
		t1 := time.Now()
		c, _, err := websocket.Dial(ctx, "ws"+srv[len("http"):]+"/ws/app", hdr)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(MaxFrameBytes)
		c.Write(ctx, websocket.MessageText, f)
		got := 0
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			frames++
			bytesIn += len(data)
			if bytes.Contains(data[:min(len(data), 64)], []byte(`"type":"`+protocol.FrameBatch+`"`)) {
				got += bytes.Count(data, []byte(`{"seq":`))
				continue
			}
			if bytes.Contains(data, []byte(`"type":"`+protocol.FrameCaughtUp+`"`)) {
				break
			}
			if bytes.Contains(data, []byte(`"type":"`+protocol.FrameError+`"`)) {
				b.Fatalf("subscribe: %s", data)
			}
		}
		catchup += time.Since(t1)
		rawTime += t1.Sub(t0)
		c.CloseNow()
		if got != n {
			b.Fatalf("%d envelopes before caught-up, want %d", got, n)
		}
	}
	b.ReportMetric(float64(catchup.Microseconds())/1000/float64(b.N), "catchup-ms")
	b.ReportMetric(float64(rawTime.Microseconds())/1000/float64(b.N), "raw-ms")
	b.ReportMetric(float64(catchup)/float64(rawTime), "catchup/raw")
	b.ReportMetric(float64(frames)/float64(b.N), "frames")
	b.ReportMetric(float64(bytesIn)/float64(b.N)/(1<<20), "MB")
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
