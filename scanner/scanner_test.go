package scanner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/testutil"
)

type memSink struct {
	mu       sync.Mutex
	recs     []Record
	fail     error
	batches  int
	failures int // calls that failed
	retries  int // batches delivered with Retry set
	sizes    []int
	bytes    []int64
}

func (m *memSink) Deliver(_ context.Context, b Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		m.failures++
		return m.fail
	}
	m.batches++
	if b.Retry {
		m.retries++
	}
	var n int64
	for _, r := range b.Records {
		n += int64(len(r.Raw))
	}
	m.sizes = append(m.sizes, len(b.Records))
	m.bytes = append(m.bytes, n)
	m.recs = append(m.recs, b.Records...)
	return nil
}

func (m *memSink) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *memSink) failed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failures
}

func (m *memSink) uuids(replayed bool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.recs {
		if r.Replayed == replayed {
			out = append(out, r.UUID)
		}
	}
	return out
}

// fileUUIDs returns the uuids delivered from file path, in order.
func (m *memSink) fileUUIDs(path string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.recs {
		if r.File == path {
			out = append(out, r.UUID)
		}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func userLine(uuid, text string) string {
	return fmt.Sprintf(`{"type":"user","uuid":%q,"message":{"role":"user","content":%q}}`+"\n", uuid, text)
}

type harness struct {
	t      *testing.T
	dir    string
	sink   *memSink
	sc     *Scanner
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func start(t *testing.T, dir string, cfg Config) *harness {
	t.Helper()
	return startWith(t, dir, cfg, nil)
}

// startWith starts a scanner after setup changed it (seams).
func startWith(t *testing.T, dir string, cfg Config, setup func(*Scanner)) *harness {
	t.Helper()
	cfg.ProjectDir = dir
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	h := &harness{t: t, dir: dir, sink: &memSink{}, done: make(chan error, 1)}
	sc, err := New(cfg, h.sink)
	if err != nil {
		t.Fatal(err)
	}
	h.sc = sc
	if setup != nil {
		setup(sc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- sc.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.once.Do(func() {
		h.cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			h.t.Fatal("scanner did not stop")
		}
	})
}

func TestScannerFollowsSessions(t *testing.T) {
	for _, noWatch := range []bool{false, true} {
		t.Run(fmt.Sprintf("noWatch=%v", noWatch), func(t *testing.T) {
			dir := t.TempDir()
			h := start(t, dir, Config{NoWatch: noWatch})
			h.sc.AddSession("s1")
			main := filepath.Join(dir, "s1.jsonl")
			// The file appears after the announcement; a partial line waits.
			appendTo(t, main, userLine("u1", "one")+`{"type":"queue-operation"}`+"\n"+`{"type":"user","uuid":"u2"`)
			waitFor(t, "u1", func() bool { return len(h.sink.uuids(false)) == 1 })
			appendTo(t, main, `,"message":{"content":"two"}}`+"\nnot json\n")
			waitFor(t, "u2", func() bool { return len(h.sink.uuids(false)) == 2 })
			// A subagent file appears.
			sub := filepath.Join(dir, "s1", "subagents", "agent-a1.jsonl")
			if err := os.MkdirAll(filepath.Dir(sub), 0o755); err != nil {
				t.Fatal(err)
			}
			appendTo(t, sub, userLine("sub-1", "task"))
			waitFor(t, "subagent record", func() bool { return len(h.sink.uuids(false)) == 3 })
			// A forked session copies history with the same uuids: it is
			// delivered for the fork as well (dedupe is per session, D21);
			// the old file is still followed.
			h.sc.AddSession("s2")
			fork := filepath.Join(dir, "s2.jsonl")
			appendTo(t, fork, userLine("u1", "one")+userLine("u2", "two")+userLine("u3", "three"))
			appendTo(t, main, userLine("u4", "late in the old file"))
			waitFor(t, "u3 and u4", func() bool { return len(h.sink.uuids(false)) == 7 })
			got := strings.Join(h.sink.uuids(false), ",")
			if !strings.HasPrefix(got, "u1,u2,sub-1,") || !strings.Contains(got, "u3") || !strings.Contains(got, "u4") {
				t.Fatalf("delivered %s", got)
			}
			if f := strings.Join(h.sink.fileUUIDs(fork), ","); f != "u1,u2,u3" {
				t.Fatalf("fork delivered %s, want u1,u2,u3", f)
			}
			// Within one session a record is still delivered once.
			appendTo(t, fork, userLine("u3", "three again")+userLine("u5", "five"))
			waitFor(t, "u5", func() bool { return len(h.sink.uuids(false)) == 8 })
			if f := strings.Join(h.sink.fileUUIDs(fork), ","); f != "u1,u2,u3,u5" {
				t.Fatalf("fork delivered %s, want u1,u2,u3,u5", f)
			}
		})
	}
}

// Restart: records written while the scanner was down are delivered once;
// records before the cursor come back marked Replayed.
func TestScannerRestartFromCursor(t *testing.T) {
	dir := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	main := filepath.Join(dir, "s1.jsonl")
	appendTo(t, main, userLine("u1", "a")+userLine("u2", "b"))
	h := start(t, dir, Config{CursorFile: cursor})
	h.sc.AddSession("s1")
	waitFor(t, "first records", func() bool { return len(h.sink.uuids(false)) == 2 })
	h.stop()

	appendTo(t, main, userLine("u3", "c")+userLine("u4", "d"))
	h2 := start(t, dir, Config{CursorFile: cursor})
	h2.sc.AddSession("s1") // announced again (--resume): its position comes from the cursor
	waitFor(t, "records of the gap", func() bool { return len(h2.sink.uuids(false)) == 2 })
	if got := strings.Join(h2.sink.uuids(false), ","); got != "u3,u4" {
		t.Fatalf("new after restart: %s", got)
	}
	if got := strings.Join(h2.sink.uuids(true), ","); got != "u1,u2" {
		t.Fatalf("replayed after restart: %s", got)
	}
}

// A session whose transcript never appears is given up after the timeout,
// once, and later sessions still work.
func TestScannerGivesUpOnMissingSession(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var logs testutil.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := start(t, dir, Config{Now: clock, MissingTimeout: time.Minute, Logger: logger})
	h.sc.AddSession("phantom")
	<-h.sc.Synced()
	<-h.sc.Synced()
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	logged := func() int { return strings.Count(logs.String(), "giving up on the session") }
	waitFor(t, "give up", func() bool { return logged() == 1 })
	h.sc.AddSession("real")
	appendTo(t, filepath.Join(dir, "real.jsonl"), userLine("r1", "x"))
	waitFor(t, "real session", func() bool { return len(h.sink.uuids(false)) == 1 })
	for range 5 {
		<-h.sc.Synced()
	}
	if n := logged(); n != 1 {
		t.Fatalf("gave up %d times", n)
	}
}

// A file truncated and rewritten mid-session is read again; dedupe keeps
// what was delivered from coming twice.
func TestScannerTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "s1.jsonl")
	appendTo(t, main, userLine("u1", "a")+userLine("u2", "b"))
	h := start(t, dir, Config{})
	h.sc.AddSession("s1")
	waitFor(t, "first", func() bool { return len(h.sink.uuids(false)) == 2 })
	if err := os.WriteFile(main, []byte(userLine("u2", "b")+userLine("u5", "e")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "after truncation", func() bool { return len(h.sink.uuids(false)) == 3 })
	if got := strings.Join(h.sink.uuids(false), ","); got != "u1,u2,u5" {
		t.Fatalf("got %s", got)
	}
}

// Bad input: each case gets a clear log line, the scanner keeps running and
// keeps delivering what it can.
func TestScannerBadInput(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // dir is the project dir
		log   string
		want  []string // uuids delivered
	}{
		{"project folder missing", func(t *testing.T, dir string) {
			os.RemoveAll(dir)
		}, "", nil},
		{"transcript is a folder", func(t *testing.T, dir string) {
			os.MkdirAll(filepath.Join(dir, "s1.jsonl"), 0o755)
		}, "cannot read transcript", nil},
		{"binary file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "s1.jsonl"), append([]byte("\x7fELF\x00\x01\x02\n\xff\xfe\n"), userLine("u1", "after junk")...), 0o644)
		}, "skipped a line that is not a record", []string{"u1"}},
		{"50 MB line", func(t *testing.T, dir string) {
			huge := `{"type":"user","uuid":"big","message":{"content":"` + strings.Repeat("x", 50<<20) + `"}}` + "\n"
			os.WriteFile(filepath.Join(dir, "s1.jsonl"), []byte(userLine("u1", "a")+huge+userLine("u2", "b")), 0o644)
		}, "skipped a line longer than the limit", []string{"u1", "u2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "proj")
			os.MkdirAll(dir, 0o755)
			tt.setup(t, dir)
			var logs testutil.SyncBuffer
			h := start(t, dir, Config{MaxLine: 16 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			h.sc.AddSession("s1")
			for range 3 {
				<-h.sc.Synced()
			}
			if tt.log != "" {
				waitFor(t, "log line "+tt.log, func() bool { return strings.Contains(logs.String(), tt.log) })
				if n := strings.Count(logs.String(), tt.log); tt.name == "transcript is a folder" && n != 1 {
					t.Fatalf("logged %d times: %s", n, logs.String())
				}
			}
			if tt.want != nil {
				waitFor(t, "records", func() bool { return len(h.sink.uuids(false)) == len(tt.want) })
			}
			if got := strings.Join(h.sink.uuids(false), ","); got != strings.Join(tt.want, ",") {
				t.Fatalf("delivered %q, want %q", got, tt.want)
			}
			// The session still works once the problem is gone.
			if tt.name == "project folder missing" {
				os.MkdirAll(dir, 0o755)
				appendTo(t, filepath.Join(dir, "s1.jsonl"), userLine("u9", "late"))
				waitFor(t, "record after the folder appeared", func() bool { return len(h.sink.uuids(false)) == 1 })
			}
		})
	}
}

// No busy loop: while nothing changes the scanner makes one pass per poll
// interval and uses next to no CPU.
func TestScannerIdle(t *testing.T) {
	dir := t.TempDir()
	appendTo(t, filepath.Join(dir, "s1.jsonl"), userLine("u1", "a"))
	h := start(t, dir, Config{PollInterval: 100 * time.Millisecond})
	h.sc.AddSession("s1")
	waitFor(t, "first record", func() bool { return len(h.sink.uuids(false)) == 1 })
	before := cpuTime()
	start := time.Now()
	passes := 0
	for time.Since(start) < time.Second {
		select {
		case <-h.sc.Synced():
			passes++
		case <-time.After(50 * time.Millisecond):
		}
	}
	cpu := cpuTime() - before
	if passes > 15 {
		t.Fatalf("%d passes in 1 s with a 100 ms interval", passes)
	}
	if cpu > 200*time.Millisecond {
		t.Fatalf("used %v of CPU in 1 s of idling", cpu)
	}
	t.Logf("idle: %d passes, %v CPU in 1 s", passes, cpu)
}

func tsLine(uuid, ts string) string {
	return fmt.Sprintf(`{"type":"assistant","uuid":%q,"timestamp":%q,"message":{"content":[{"type":"text","text":"x"}]}}`+"\n", uuid, ts)
}

// Records of a session's files are delivered in timestamp order, as replay
// merges them, even when a subagent file is written a little after the main
// transcript got a later record.
func TestScannerOrdersAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "s1.jsonl")
	sub := filepath.Join(dir, "s1", "subagents", "agent-a1.jsonl")
	os.MkdirAll(filepath.Dir(sub), 0o755)
	// History (old timestamps) flows at once; only recent records wait.
	appendTo(t, main, tsLine("m0", "2026-01-01T10:00:00.000Z"))
	appendTo(t, sub, tsLine("s0", "2026-01-01T10:00:00.010Z"))
	h := start(t, dir, Config{OrderWindow: time.Second})
	h.sc.AddSession("s1")
	waitFor(t, "first records", func() bool { return len(h.sink.uuids(false)) == 2 })
	base := time.Now()
	at := func(ms int) string {
		return base.Add(time.Duration(ms) * time.Millisecond).UTC().Format(time.RFC3339Nano)
	}
	select { // drop a token from before the append
	case <-h.sc.Synced():
	default:
	}
	appendTo(t, main, tsLine("m1", at(100)))
	<-h.sc.Synced() // the pass that read m1 (woken by the file event)
	if got := len(h.sink.uuids(false)); got != 2 {
		t.Fatalf("m1 was delivered while the subagent file was behind and active (%d records)", got)
	}
	appendTo(t, sub, tsLine("s1", at(50)))
	waitFor(t, "all records", func() bool { return len(h.sink.uuids(false)) == 4 })
	if got := strings.Join(h.sink.uuids(false), ","); got != "m0,s0,s1,m1" {
		t.Fatalf("order %s, want m0,s0,s1,m1", got)
	}
}

// AddSession does not block once the scanner has stopped (a hook arriving
// after a failure must not hang).
func TestAddSessionAfterStop(t *testing.T) {
	h := start(t, t.TempDir(), Config{})
	h.stop()
	for i := range 100 {
		h.sc.AddSession(fmt.Sprint("s", i))
	}
}

// What the scanner remembers of a session's records, to deliver each once,
// stays bounded however long the session (claude.DedupeWindow keys): a
// ccrelay follows a session for as long as it runs, and it grew with every
// record.
func TestScannerDedupeBounded(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, Config{NoWatch: true})
	h.sc.AddSession("s1")
	const n = 3 * claude.DedupeWindow
	var b strings.Builder
	for i := range n {
		b.WriteString(userLine(fmt.Sprintf("u%d", i), "x"))
	}
	appendTo(t, filepath.Join(dir, "s1.jsonl"), b.String())
	waitFor(t, "every record", func() bool { return len(h.sink.uuids(false)) == n })
	h.stop()
	if got := h.sc.dedupe["s1"].Len(); got > claude.DedupeWindow {
		t.Fatalf("%d record keys remembered after %d records, more than %d", got, n, claude.DedupeWindow)
	}
}
