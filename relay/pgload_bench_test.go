package relay

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/pgtest"
)

// BenchmarkPostgresAtLoad: one relay on PostgreSQL against one on SQLite,
// each with one CLI and one app, while busy loops (child processes, one a
// core unless CCRELAY_BENCH_LOAD says how many) load the machine. Each
// engine stores a flood (batches of 100, as fast as acks come: envelopes/s)
// and then 1,000 envelopes/s for 5 s (10 every 10 ms), whose acks give the
// append's latency as the CLI sees it (send to ack, p50 and p99). It
// reports postgres/sqlite, the ratio of the floods (goal ≥ 0.8), the
// p99s (goal for PostgreSQL < 20 ms) and the load average at the end.
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
	rate := map[string]float64{}
	b.ResetTimer()
	for _, engine := range []string{"sqlite", "postgres"} {
		u := base(engine)
		rate[engine], _, _ = floodAcks(b, u, u, 1, total, false, nil)
		u = base(engine) // a new database: the same ids again would be resends
		_, _, acks := floodAcks(b, u, u, 1, 5000, true, nil)
		b.ReportMetric(rate[engine], engine+"-envelopes/s")
		b.ReportMetric(float64(acks[len(acks)/2].Microseconds())/1000, engine+"-p50-ms")
		b.ReportMetric(float64(acks[len(acks)*99/100].Microseconds())/1000, engine+"-p99-ms")
	}
	b.StopTimer()
	b.ReportMetric(rate["postgres"]/rate["sqlite"], "postgres/sqlite")
	b.ReportMetric(loadAverage(), "load1")
}

// busyLoops starts n child processes that spin until stop is called.
func busyLoops(b *testing.B, n int) (stop func()) {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
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
