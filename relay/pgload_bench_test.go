package relay

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/internal/pgtest"
)

// BenchmarkPostgresAtLoad: one relay on PostgreSQL against one on SQLite,
// each with one CLI and one app, while busy loops (child processes, one a
// core unless CCRELAY_BENCH_LOAD says how many) load the machine. Each
// engine stores a flood (batches of 100, as fast as acks come: envelopes/s)
// and then 1,000 envelopes/s for 5 s (10 every 10 ms), whose acks give the
// append's latency as the CLI sees it (send to ack, p50 and p99). While
// PostgreSQL's paced acks are measured, two floors are measured at the
// same time, in this process, with the same pace: CLI-sized frames
// answered by a websocket server that does nothing (echo), and by one that
// makes one round trip to the same PostgreSQL first (pg-select1): what the
// machine's scheduling alone costs an ack that needs one round trip. It
// reports postgres/sqlite, the ratio of the floods (goal ≥ 0.8), the p99s
// (goal for PostgreSQL < 20 ms), the PostgreSQL p99 over the pg-select1
// floor's and the load average at the end.
//
// The busy loops run in the benchmark's own session: with the kernel's
// autogroup scheduling (Linux, sched_autogroup_enabled) they share one
// session's CPU time with the relay, while PostgreSQL's processes each
// have a session of their own. CCRELAY_BENCH_LOAD_APART=1 starts them in a
// session of their own instead, as another user's job would be.
//
//	go test -run '^$' -bench PostgresAtLoad -benchtime 3000x ./relay/
func BenchmarkPostgresAtLoad(b *testing.B) {
	pg := pgtest.Start(b)
	loops := runtime.NumCPU()
	if n, err := strconv.Atoi(os.Getenv("CCRELAY_BENCH_LOAD")); err == nil && n >= 0 {
		loops = n
	}
	stop := busyLoops(b, loops)
	defer stop()
	total := max(b.N, 1000)
	base := func(engine string) string {
		if engine == "sqlite" {
			st, err := OpenStore(filepath.Join(b.TempDir(), "relay.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return httptestServer(b, NewServer(st, slog.New(slog.DiscardHandler), testToken).Handler())
		}
		return startNode(b, pg.NewDatabase(b)).srv.URL
	}
	db, err := sql.Open("pgx", pg.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rate, p99 := map[string]float64{}, map[string]float64{}
	report := func(name string, acks []time.Duration) {
		b.ReportMetric(float64(acks[len(acks)/2].Microseconds())/1000, name+"-p50-ms")
		p99[name] = float64(acks[len(acks)*99/100].Microseconds()) / 1000
		b.ReportMetric(p99[name], name+"-p99-ms")
	}
	b.ResetTimer()
	for _, engine := range []string{"sqlite", "postgres"} {
		u := base(engine)
		rate[engine], _, _ = floodAcks(b, u, u, 1, total, false, nil)
		b.ReportMetric(rate[engine], engine+"-envelopes/s")
		u = base(engine) // a new database: the same ids again would be resends
		if engine == "sqlite" {
			_, _, acks := floodAcks(b, u, u, 1, 5000, true, nil)
			report(engine, acks)
			continue
		}
		floors := []struct {
			name   string
			db     *sql.DB
			offset time.Duration // from the CLI's ticks
			acks   []time.Duration
			err    error
		}{{name: "echo", offset: 3 * time.Millisecond}, {name: "pg-select1", db: db, offset: 6 * time.Millisecond}}
		var wg sync.WaitGroup
		for i := range floors {
			f := &floors[i]
			wg.Go(func() { f.acks, f.err = floorAcks(f.db, f.offset) })
		}
		_, _, acks := floodAcks(b, u, u, 1, 5000, true, nil)
		wg.Wait()
		report(engine, acks)
		for _, f := range floors {
			if f.err != nil {
				b.Fatalf("%s floor: %v", f.name, f.err)
			}
			report(f.name, f.acks)
		}
	}
	b.StopTimer()
	b.ReportMetric(p99["postgres"]/p99["pg-select1"], "postgres-p99/floor")
	b.ReportMetric(rate["postgres"]/rate["sqlite"], "postgres/sqlite")
	b.ReportMetric(loadAverage(), "load1")
}

// busyLoops starts n child processes that spin until stop is called.
func busyLoops(b *testing.B, n int) (stop func()) {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if os.Getenv("CCRELAY_BENCH_LOAD_APART") == "1" {
			c.SysProcAttr = sessionApart()
		}
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	return func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
		cmds = nil
	}
}

// loadAverage is the machine's load average over the last minute (Linux;
// 0 elsewhere).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	f, _ := strconv.ParseFloat(fields[0], 64)
	return f
}

// floorAcks measures what an ack cannot beat on this machine in the same
// conditions: a websocket server in this process that answers each of 500
// CLI-sized frames, sent every 10 ms (after offset), with a small ack,
// after one round trip to PostgreSQL (SELECT 1 on db) when db is not nil.
// It returns the send-to-ack times, sorted.
func floorAcks(db *sql.DB, offset time.Duration) ([]time.Duration, error) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(MaxFrameBytes)
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
			if db != nil {
				var one int
				if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
					c.Close(websocket.StatusInternalError, err.Error())
					return
				}
			}
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"v":1,"type":"ack"}`)); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, _, err := websocket.Dial(ctx, "ws"+srv.URL[len("http"):], nil)
	if err != nil {
		return nil, err
	}
	defer c.CloseNow()
	frame := bytes.Repeat([]byte("x"), 1500) // about a paced batch of 10
	time.Sleep(offset)                       // the floors' ticks fall between the CLI's
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	acks := make([]time.Duration, 0, 500)
	for range 500 {
		<-tick.C
		sent := time.Now()
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			return nil, err
		}
		if _, _, err := c.Read(ctx); err != nil {
			return nil, err
		}
		acks = append(acks, time.Since(sent))
	}
	slices.Sort(acks)
	return acks, nil
}
