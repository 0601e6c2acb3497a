package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/protocol"
)

// relayProcessEnv makes the test binary a relay process (TestRelayProcess)
// with its database in the folder it names.
const relayProcessEnv = "CCRELAY_TEST_RELAY_PROCESS"

// relayProfileEnv, set when a benchmark starts a relay process, names the
// file where that process writes its CPU profile (the relay's work alone).
const relayProfileEnv = "CCRELAY_TEST_RELAY_CPUPROFILE"

// relayHeapProfileEnv names the file where the relay process writes its
// heap profile at each "stats" line (the last one written is kept).
const relayHeapProfileEnv = "CCRELAY_TEST_RELAY_HEAPPROFILE"

// TestRelayProcess is not a test: run with relayProcessEnv set (by
// startRelayProcess), it serves a relay on 127.0.0.1, prints "addr ADDR",
// answers each "stats" line on stdin with its memory after a GC (and the
// CPU time it used so far), and exits when stdin closes. The memory figures are then the relay's alone.
func TestRelayProcess(t *testing.T) {
	dir := os.Getenv(relayProcessEnv)
	if dir == "" {
		return
	}
	if os.Getenv(relayHeapProfileEnv) != "" {
		runtime.MemProfileRate = 1 // every allocation, for a profile of a few KB per connection
	}
	st, err := OpenStore(filepath.Join(dir, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	s.Limits = Limits{MaxConns: 1 << 16, MaxConnsPerAddr: 1 << 16}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := s.HTTPServer(context.Background())
	go srv.Serve(s.Listener(ln))
	if path := os.Getenv(relayProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	fmt.Printf("addr %s\n", ln.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cpu := cpuTime() // before the GC, which is the stats' own work
		// Twice: what sync.Pools cache (coder/websocket's compressors, of
		// about 1.2 MB each, taken for one frame and given back) survives
		// one GC; it is no connection's, and a second one frees it.
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if path := os.Getenv(relayHeapProfileEnv); path != "" {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
		fmt.Printf("heap %d stack %d rss %d goroutines %d cpu %d\n", ms.HeapInuse, ms.StackInuse, rss(), runtime.NumGoroutine(), cpu)
	}
	pprof.StopCPUProfile()
	os.Exit(0) // the connections die with the process
}

// rss is this process's resident set in bytes (0 where /proc is missing).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// relayProcess is a relay in a child process.
type relayProcess struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

type memStats struct{ heap, stack, rss, goroutines, cpu int64 }

func startRelayProcess(tb testing.TB) *relayProcess {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRelayProcess$")
	cmd.Env = append(os.Environ(), relayProcessEnv+"="+tb.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &relayProcess{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	tb.Cleanup(func() { stdin.Close(); cmd.Wait() })
	if !p.out.Scan() || !strings.HasPrefix(p.out.Text(), "addr ") {
		tb.Fatalf("relay process: %q", p.out.Text())
	}
	p.addr = strings.TrimPrefix(p.out.Text(), "addr ")
	return p
}

func (p *relayProcess) stats(tb testing.TB) memStats {
	tb.Helper()
	fmt.Fprintln(p.stdin, "stats")
	var m memStats
	if !p.out.Scan() {
		tb.Fatal("relay process ended")
	}
	if _, err := fmt.Sscanf(p.out.Text(), "heap %d stack %d rss %d goroutines %d cpu %d", &m.heap, &m.stack, &m.rss, &m.goroutines, &m.cpu); err != nil {
		tb.Fatalf("stats %q: %v", p.out.Text(), err)
	}
	return m
}

// idleApps opens n app connections to the relay process, each asking for
// heartbeats as browsers do (web/static/js) and offering compression as
// they do (or not, as compression says); each lists the sessions and
// reads a session's history (compressed frames, where compression is on:
// each connection has compressed at least once), then idles. It returns the relay's memory growth.
func idleApps(tb testing.TB, n int, compression websocket.CompressionMode) (before, after memStats) {
	p := startRelayProcess(tb)
	var readers sync.WaitGroup
	defer readers.Wait() // after the connections are closed
	var ended atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	cli, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/ws/cli", &websocket.DialOptions{HTTPHeader: auth})
	if err != nil {
		tb.Fatal(err)
	}
	const session = s1
	for i := 0; i < 300; i += 100 {
		f, _ := json.Marshal(protocol.Frame{V: 1, Type: protocol.FrameEnvelopes, Session: session, Envelopes: envelopes(session, i, i+100)})
		if err := cli.Write(ctx, websocket.MessageText, f); err != nil {
			tb.Fatal(err)
		}
		_, b, err := cli.Read(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		var ack protocol.Frame
		if err := json.Unmarshal(b, &ack); err != nil || ack.Type != protocol.FrameAck {
			tb.Fatalf("storing the history: %s", b)
		}
	}
	cli.Close(websocket.StatusNormalClosure, "")
	before = p.stats(tb)
	for range n {
		c, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/ws/app?heartbeat=1", &websocket.DialOptions{HTTPHeader: auth, CompressionMode: compression})
		if err != nil {
			tb.Fatal(err)
		}
		c.SetReadLimit(MaxFrameBytes)
		defer c.CloseNow()
		for _, f := range []protocol.Frame{{V: 1, Type: protocol.FrameList}, {V: 1, Type: protocol.FrameSubscribe, Session: session}} {
			b, _ := json.Marshal(f)
			if err := c.Write(ctx, websocket.MessageText, b); err != nil {
				tb.Fatal(err)
			}
		}
		for caughtUp := false; !caughtUp; {
			_, b, err := c.Read(ctx)
			if err != nil {
				tb.Fatal(err)
			}
			var f protocol.Frame
			json.Unmarshal(b, &f)
			if f.Type == protocol.FrameError {
				tb.Fatalf("app %s: %s", f.Code, f.Message)
			}
			caughtUp = f.Type == protocol.FrameCaughtUp
		}
		// Idle: reading heartbeats and answering pings, as a browser does
		// (CloseRead would close the connection at the first heartbeat).
		readers.Go(func() {
			for {
				if _, _, err := c.Read(ctx); err != nil {
					ended.Add(1)
					return
				}
			}
		})
	}
	after = p.stats(tb)
	if n := ended.Load(); n > 0 {
		tb.Fatalf("%d of the idle apps were closed before they were measured", n)
	}
	return before, after
}

// maxIdleAppBytes is the budget of one idle compressed app connection in
// the relay (heap and goroutine stacks; about 34 KB measured, where the
// reader's stack is 16 KB of it): 1,000 apps in under 40 MB.
const maxIdleAppBytes = 40 << 10

// maxIdleAppGoroutines: an idle app that follows a session holds its
// handler (the reader) alone: its writer, which also serves its
// subscriptions once caught up and its session-list changes, is a
// goroutine only while something waits to be written; pings and
// heartbeats run on timers (a stack each was most of an idle app's cost).
const maxIdleAppGoroutines = 1

// Idle app connections cost the relay a bounded amount each, compressed
// or not (with the compression context kept, each held a 1.2 MB
// compressor for as long as it was open), and a bounded number of
// goroutines.
func TestIdleAppMemory(t *testing.T) {
	const n = 200
	before, after := idleApps(t, n, websocket.CompressionContextTakeover)
	per := (after.heap + after.stack - before.heap - before.stack) / n
	goroutines := float64(after.goroutines-before.goroutines) / n
	t.Logf("%d idle apps: heap+stack %d KB per app (stacks %d KB), %.2f goroutines per app, RSS +%.1f MB",
		n, per>>10, (after.stack-before.stack)/n>>10, goroutines, float64(after.rss-before.rss)/(1<<20))
	// A few goroutines of the relay's own may start meanwhile.
	if after.goroutines-before.goroutines > maxIdleAppGoroutines*n+10 {
		t.Errorf("an idle app holds %.2f goroutines in the relay, want at most %d", goroutines, maxIdleAppGoroutines)
	}
	budget := int64(maxIdleAppBytes)
	if raceEnabled {
		// The race detector's larger stacks and allocations.
		budget = budget * 3 / 2
	}
	if per > budget {
		t.Fatalf("an idle app costs %d KB of heap and stack, budget %d KB", per>>10, budget>>10)
	}
}

// BenchmarkIdleApps: the relay's memory growth with 1,000 idle app
// connections (in a relay process of its own), compressed as a browser
// connects and without compression. It measures once, whatever b.N is.
func BenchmarkIdleApps(b *testing.B) {
	for _, tc := range []struct {
		name string
		mode websocket.CompressionMode
	}{
		{"compressed", websocket.CompressionContextTakeover},
		{"plain", websocket.CompressionDisabled},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 1000
			before, after := idleApps(b, n, tc.mode)
			for b.Loop() {
			}
			b.ReportMetric(float64(after.rss-before.rss)/(1<<20), "rss-MB")
			b.ReportMetric(float64(after.heap+after.stack-before.heap-before.stack)/(1<<20), "heap+stack-MB")
			b.ReportMetric(float64(after.heap+after.stack-before.heap-before.stack)/n/(1<<10), "KB/app")
			b.ReportMetric(float64(after.stack-before.stack)/n/(1<<10), "stack-KB/app")
			b.ReportMetric(float64(after.heap+after.stack-before.heap-before.stack)/n, "bytes/conn")
			b.ReportMetric(float64(after.goroutines-before.goroutines)/n, "goroutines/conn")
		})
	}
}
