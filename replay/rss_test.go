package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ccrelay/ccrelay/internal/synth"
	"github.com/ccrelay/ccrelay/protocol"
)

// rssChildEnv names the transcript a child test process replays.
const rssChildEnv = "CCRELAY_REPLAY_RSS_FILE"

// MaxReplayRSS is the peak resident memory a replay may take at any input
// size.
const maxReplayRSS = 32 << 20

// TestReplayRSSChild is the child of replayPeakRSS: it replays the file
// named by rssChildEnv as ccrelay replay --format jsonl does and prints its
// peak RSS. Without the variable it does nothing.
func TestReplayRSSChild(t *testing.T) {
	path := os.Getenv(rssChildEnv)
	if path == "" {
		return
	}
	defer LimitMemory()()
	s, err := FindSession([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(io.Discard, 64<<10)
	var line []byte
	st, err := Run(context.Background(), s, Options{}, func(e *protocol.Envelope) error {
		var err error
		if line, err = e.AppendJSON(line[:0]); err != nil {
			return err
		}
		_, err = bw.Write(append(line, '\n'))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("\nrss-result %d %d %d %d %d\n", st.PeakRSS, st.Bytes, st.EnvelopeCount(), st.Elapsed.Nanoseconds(), ms.NumGC)
}

var (
	rssChildOnce sync.Once
	rssChildDir  string
	rssChildPath string
	rssChildErr  error
)

// TestMain removes the child binary rssChild built, which outlives the
// tests that share it: the tests leave the temporary folder empty.
func TestMain(m *testing.M) {
	code := m.Run()
	if rssChildDir != "" {
		os.RemoveAll(rssChildDir)
	}
	os.Exit(code)
}

// rssChild is the test binary that replays in a fresh process: this one,
// or under the race detector (whose shadow memory is no part of a replay's)
// this package's tests built without it.
func rssChild(tb testing.TB) string {
	if !raceEnabled {
		return os.Args[0]
	}
	rssChildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "replay-rss-")
		if err != nil {
			rssChildErr = err
			return
		}
		rssChildDir = dir
		rssChildPath = filepath.Join(dir, "replay.test")
		if out, err := exec.Command("go", "test", "-c", "-o", rssChildPath, ".").CombinedOutput(); err != nil {
			rssChildErr = fmt.Errorf("build the replay tests without -race: %v\n%s", err, out)
		}
	})
	if rssChildErr != nil {
		tb.Fatal(rssChildErr)
	}
	return rssChildPath
}

type rssResult struct {
	peak, bytes, envelopes int64
	secs                   float64
	collections            int64 // garbage collections in the whole process
}

// replayPeakRSS replays path in a fresh process (this test binary) and
// returns what it measured.
func replayPeakRSS(tb testing.TB, path string) rssResult {
	tb.Helper()
	cmd := exec.Command(rssChild(tb), "-test.run=^TestReplayRSSChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), rssChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("replay child: %v\n%s", err, out)
	}
	for l := range strings.Lines(string(out)) {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "rss-result" {
			var v [5]int64
			for i := range v {
				v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
			}
			return rssResult{peak: v[0], bytes: v[1], envelopes: v[2], secs: float64(v[3]) / 1e9, collections: v[4]}
		}
	}
	tb.Fatalf("no result from the replay child:\n%s", out)
	return rssResult{}
}

// writeMix writes a transcript of at least size bytes made of copies of
// every corpus session, their ids made unique.
func writeMix(tb testing.TB, path string, size int64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := synth.Write(f, size, mixSources(tb)...); err != nil {
		f.Close()
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// A replay's peak memory does not grow with its input: from 3 MB to
// 100 MB it grows by at most maxRSSGrowth and stays under maxReplayRSS
// (BenchmarkReplayPeakRSS adds 1 GB; TestReplayMemoryBounded checks the
// ccrelay binary).
func TestReplayPeakRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 100 MB transcript")
	}
	// Measured on the 2-core machine at load 15-20: 2.6-5.3 MiB; 8.5 MiB
	// before the replay bounded its memory.
	const maxRSSGrowth = 7 << 20
	var peaks []int64
	for _, size := range []int64{3 << 20, 100 << 20} {
		p := filepath.Join(t.TempDir(), "mix.jsonl")
		writeMix(t, p, size)
		r := replayPeakRSS(t, p)
		t.Logf("%d MB, %d envelopes: peak RSS %.1f MiB, %.1f MB/s", r.bytes>>20, r.envelopes,
			float64(r.peak)/(1<<20), float64(r.bytes)/1e6/r.secs)
		if r.envelopes < size>>14 {
			t.Fatalf("only %d envelopes from %d bytes", r.envelopes, r.bytes)
		}
		if r.peak <= 0 || r.peak > maxReplayRSS {
			t.Fatalf("peak RSS %.1f MiB, want at most %d MiB", float64(r.peak)/(1<<20), maxReplayRSS>>20)
		}
		peaks = append(peaks, r.peak)
	}
	if g := peaks[1] - peaks[0]; g > maxRSSGrowth {
		t.Fatalf("peak RSS grew by %.1f MiB from 3 MB to 100 MB, want at most %d MiB", float64(g)/(1<<20), maxRSSGrowth>>20)
	}
}

// BenchmarkReplayPeakRSS reports a replay's peak RSS (peak-MiB, in a fresh
// process) at 3 MB, 100 MB and 1 GB of input; the input is written to a
// temporary folder and removed after.
//
//	go test ./replay -run '^$' -bench ReplayPeakRSS -benchtime 1x
func BenchmarkReplayPeakRSS(b *testing.B) {
	for _, size := range []int64{3 << 20, 100 << 20, 1 << 30} {
		b.Run(strconv.FormatInt(size>>20, 10)+"MB", func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "mix.jsonl")
			writeMix(b, p, size)
			var peak int64
			var secs float64
			for b.Loop() {
				r := replayPeakRSS(b, p)
				peak, secs = max(peak, r.peak), secs+r.secs
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(size)*float64(b.N)/1e6/secs, "MB/s")
		})
	}
}

// A replay's collector runs on its memory limit alone: a real 3 MB
// session (with its subagent transcripts) is read with at most one
// collection, where the proportional collector (GOGC=100), starting at a
// 4 MB heap, ran three or more, a tenth of the process's CPU time.
func TestReplayCollections(t *testing.T) {
	p := filepath.Join(corpusDir, "public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
	r := replayPeakRSS(t, p)
	t.Logf("%d bytes, %d envelopes: %d collections, peak RSS %.1f MiB", r.bytes, r.envelopes, r.collections, float64(r.peak)/(1<<20))
	if r.bytes < 3<<20 {
		t.Fatalf("read %d bytes, want the whole session (over 3 MiB)", r.bytes)
	}
	if r.collections > 1 {
		t.Fatalf("%d collections, want at most 1", r.collections)
	}
	if r.peak > maxReplayRSS {
		t.Fatalf("peak RSS %.1f MiB, want at most %d MiB", float64(r.peak)/(1<<20), maxReplayRSS>>20)
	}
}
