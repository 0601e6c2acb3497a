package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

var fakeClaude string

func buildFakeClaude(t testing.TB) string {
	t.Helper()
	if fakeClaude == "" {
		p := filepath.Join(filepath.Dir(binary), "fakeclaude")
		if out, err := exec.Command("go", "build", "-o", p, "../../internal/fakeclaude").CombinedOutput(); err != nil {
			t.Fatalf("build fakeclaude: %v\n%s", err, out)
		}
		fakeClaude = p
	}
	return fakeClaude
}

type localRun struct {
	home, project, state, out, pidfile string
	script                             string
}

func newLocalRun(t testing.TB, lines []string, extra map[string]any) *localRun {
	buildFakeClaude(t)
	r := &localRun{home: t.TempDir(), project: t.TempDir(), state: t.TempDir()}
	r.out = filepath.Join(r.state, "out.jsonl")
	r.pidfile = filepath.Join(r.state, "claude.pid")
	sc := map[string]any{"lines": lines}
	for k, v := range extra {
		sc[k] = v
	}
	b, _ := json.Marshal(sc)
	r.script = filepath.Join(r.state, "script.json")
	os.WriteFile(r.script, b, 0o644)
	return r
}

func (r *localRun) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, append([]string{"--claude", fakeClaude, "--state", r.state, "--out", r.out}, args...)...)
	cmd.Dir = r.project
	cmd.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + r.script, "FAKE_CLAUDE_PIDFILE=" + r.pidfile}
	return cmd
}

func (r *localRun) envelopes(t *testing.T) []protocol.Envelope {
	t.Helper()
	f, err := os.Open(r.out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var envs []protocol.Envelope
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e protocol.Envelope
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("outbox line %q: %v", sc.Text(), err)
		}
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e)
	}
	return envs
}

func kinds(envs []protocol.Envelope) string {
	var s []string
	for _, e := range envs {
		k := string(e.Ev.T)
		if e.Ev.T == protocol.KindTurnEnd {
			k += "(" + string(e.Ev.Status) + ")"
		}
		if e.Ev.T == protocol.KindText {
			k += ":" + e.Ev.Text
		}
		s = append(s, k)
	}
	return strings.Join(s, " ")
}

func recLines(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf(`{"type":"assistant","uuid":"a%d","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:%02d.000Z","message":{"id":"m%d","content":[{"type":"text","text":"t%d"}]}}`, i, i%60, i, i))
	}
	return out
}

// Local mode end to end with a fake claude: its arguments pass through, the
// hook reports the session, the transcript is mapped into the outbox, the
// open turn is closed by Claude's exit status, and ccrelay exits with
// Claude's exit code.
func TestLocalModeExitStatus(t *testing.T) {
	for _, tc := range []struct {
		exit   int
		status string
	}{{0, "completed"}, {3, "failed"}} {
		t.Run(fmt.Sprint("exit ", tc.exit), func(t *testing.T) {
			lines := append([]string{`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"hi"}}`}, recLines(1, 3)...)
			r := newLocalRun(t, lines, map[string]any{"exit": tc.exit})
			out, err := r.command("--", "--session-id", "11111111-2222-4333-8444-555555555555").CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tc.exit {
				t.Fatalf("exit %d, want %d: %s", code, tc.exit, out)
			}
			want := "text:hi turn-start text:t1 text:t2 turn-end(" + tc.status + ")"
			if got := kinds(r.envelopes(t)); got != want {
				t.Fatalf("outbox: %s\nwant:   %s", got, want)
			}
		})
	}
}

// waitLimit bounds the tests' waits for ccrelay, Claude (real or fake), the
// relay or the browser to get somewhere: generous, as a loaded machine
// under -race delays them by seconds. A wait that is met returns at once.
const waitLimit = 60 * time.Second

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("fake claude never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for testutil.ProcessAlive(pid) {
		// A zombie still answers kill(0); it has exited all the same.
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("claude (pid %d) outlived ccrelay", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// No claude outlives ccrelay, whether ccrelay is stopped or killed.
func TestLocalModeNoOrphans(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			r := newLocalRun(t, recLines(0, 1), map[string]any{"hang": true})
			cmd := r.command()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := readPID(t, r.pidfile)
			cmd.Process.Signal(sig)
			cmd.Wait()
			waitGone(t, pid)
		})
	}
}

// ccrelay killed with SIGKILL mid-session, Claude's transcript growing while
// it is down, then started again on the same state: every record arrives in
// the outbox exactly once.
func TestLocalModeRestartDeliversOnce(t *testing.T) {
	const session = "11111111-2222-4333-8444-555555555555"
	r := newLocalRun(t, recLines(0, 40), map[string]any{"intervalMs": 20, "hang": true})
	cmd := r.command("--", "--session-id", session)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readPID(t, r.pidfile)
	// Kill once some records are in the outbox.
	deadline := time.Now().Add(waitLimit)
	for {
		if b, _ := os.ReadFile(r.out); strings.Count(string(b), "\n") >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing reached the outbox")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	// While ccrelay is down, more is written to the transcript.
	matches, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
	if len(matches) != 1 {
		t.Fatalf("transcript: %v", matches)
	}
	f, _ := os.OpenFile(matches[0], os.O_WRONLY|os.O_APPEND, 0)
	for _, l := range recLines(40, 50) {
		f.WriteString(strings.ReplaceAll(l, "{{session}}", session) + "\n")
	}
	f.Close()
	// Started again, resuming: Claude appends five more records.
	b, _ := json.Marshal(map[string]any{"lines": recLines(50, 55)})
	os.WriteFile(r.script, b, 0o644)
	if out, err := r.command("--", "--resume", session).CombinedOutput(); err != nil {
		t.Fatalf("second run: %v %s", err, out)
	}
	seen := map[string]int{}
	for _, e := range r.envelopes(t) {
		if e.ClaudeUUID != "" {
			seen[e.ClaudeUUID]++
		}
	}
	// The first run's writer died with ccrelay somewhere in 0..39; what it
	// wrote plus 40..54 must each be there once.
	onDisk, _ := os.ReadFile(matches[0])
	n := strings.Count(string(onDisk), "\n")
	if len(seen) != n {
		t.Fatalf("%d records in the outbox, %d in the transcript", len(seen), n)
	}
	for u, c := range seen {
		if c != 1 {
			t.Fatalf("record %s delivered %d times", u, c)
		}
	}
	for i := 40; i < 55; i++ {
		if seen[fmt.Sprintf("a%d", i)] != 1 {
			t.Fatalf("record a%d missing", i)
		}
	}
}
