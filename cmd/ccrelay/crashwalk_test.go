package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
)

// crashRelay is `ccrelay serve` that may be started with a crash point and
// is started again (without it) whenever it dies.
type crashRelay struct {
	t          *testing.T
	data, addr string
	base       string
	token      string
	cmd        *exec.Cmd
	exited     chan struct{}
	crashes    int
}

func startCrashRelay(t *testing.T, point string) *crashRelay {
	r := &crashRelay{t: t, data: t.TempDir()}
	cmd := exec.Command(binary, "serve", "--data", r.data, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), crashpoint.Env+"="+point)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	re := regexp.MustCompile(`app:\s+(http://[0-9.:]+)/#token=([0-9a-f]+)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			r.base, r.token = m[1], m[2]
			break
		}
	}
	go io.Copy(io.Discard, out)
	if r.base == "" {
		cmd.Process.Kill()
		t.Fatal("serve printed no app URL")
	}
	r.addr = strings.TrimPrefix(r.base, "http://")
	r.watch(cmd)
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		<-r.exited
	})
	return r
}

func (r *crashRelay) watch(cmd *exec.Cmd) {
	r.cmd, r.exited = cmd, make(chan struct{})
	exited := r.exited
	go func() { cmd.Wait(); close(exited) }()
}

// revive starts the relay again if it died (a crash point), and reports
// whether it did.
func (r *crashRelay) revive() bool {
	select {
	case <-r.exited:
	default:
		return false
	}
	if !killed(r.cmd) {
		r.t.Fatalf("the relay ended without a crash: %v", r.cmd.ProcessState)
	}
	r.crashes++
	r.watch(restartServe(r.t, r.data, r.addr))
	return true
}

func killed(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// waitCLI waits for a ccrelay run to end, reviving the relay meanwhile,
// and reports whether the run was killed by its crash point.
func waitCLI(t *testing.T, cmd *exec.Cmd, rl *crashRelay, stderr *strings.Builder) bool {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-done:
			if killed(cmd) {
				return true
			}
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("ccrelay: %v", err)
			}
			if err != nil {
				t.Fatalf("ccrelay: %v\n%s", err, stderr)
			}
			return false
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("ccrelay did not end\n%s", stderr)
		case <-time.After(20 * time.Millisecond):
			rl.revive()
		}
	}
}

// bigLines are assistant records of size bytes of text each.
func bigLines(from, to, size int) []string {
	var out []string
	for i := from; i < to; i++ {
		text := strings.Repeat(fmt.Sprintf("t%d ", i), size/(len(fmt.Sprint(i))+2))
		out = append(out, fmt.Sprintf(`{"type":"assistant","uuid":"a%d","sessionId":"{{session}}","timestamp":"2026-11-22T10:%02d:%02d.000Z","message":{"id":"m%d","role":"assistant","content":[{"type":"text","text":%q}]}}`, i, i/60, i%60, i, text))
	}
	return out
}

func userLine(uuid string, minute int, text string) string {
	return fmt.Sprintf(`{"type":"user","uuid":%q,"sessionId":"{{session}}","timestamp":"2026-11-22T11:%02d:00.000Z","message":{"role":"user","content":%q}}`, uuid, minute, text)
}

// crashSteps are the steps a local session meets, each walked at its
// first hit (renamed: the first three durable replaces, whichever files
// they are).
var crashSteps = []string{crashpoint.ScannerDelivered, crashpoint.OutboxWritten, crashpoint.OutboxSynced, crashpoint.RelayCommitted,
	crashpoint.OutboxAcked, crashpoint.OutboxCompacted, crashpoint.Renamed, crashpoint.Renamed + "@2", crashpoint.Renamed + "@3"}

// Every crash point, enumerated: a local session runs with the CLI (or the
// relay) killed at the step, then again (resumed, no crash); the relay ends
// with exactly `ccrelay replay --format jsonl` of the transcript, nothing
// lost and nothing twice.
func TestCrashPointsLocal(t *testing.T) {
	buildFakeClaude(t)
	for _, step := range crashSteps {
		t.Run(step, func(t *testing.T) {
			const session = "12121212-2222-4333-8444-555555555555"
			relayPoint := ""
			if step == crashpoint.RelayCommitted {
				relayPoint = step
			}
			rl := startCrashRelay(t, relayPoint)
			// 30 records of 40 KB: the outbox passes its compaction size.
			lines := append([]string{userLine("u1", 0, "first")}, bigLines(0, 30, 40<<10)...)
			r := newLocalRun(t, lines, map[string]any{"intervalMs": 2})
			cmd := r.command("--relay", rl.base, "--relay-token", rl.token, "--", "--session-id", session)
			if relayPoint == "" {
				cmd.Env = append(cmd.Env, crashpoint.Env+"="+step)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := readPID(t, r.pidfile)
			crashed := waitCLI(t, cmd, rl, &stderr)
			waitGone(t, pid)
			if !crashed && rl.crashes == 0 {
				t.Fatalf("step %s was never reached", step)
			}
			// Again, resumed: the user types once more.
			b, _ := json.Marshal(map[string]any{"lines": append([]string{userLine("u2", 1, "second")}, bigLines(30, 33, 100)...)})
			os.WriteFile(r.script, b, 0o644)
			os.Remove(r.pidfile)
			cmd = r.command("--relay", rl.base, "--relay-token", rl.token, "--", "--resume", session)
			stderr.Reset()
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if waitCLI(t, cmd, rl, &stderr) {
				t.Fatal("the second run crashed")
			}
			matches, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
			if len(matches) != 1 {
				t.Fatalf("transcript: %v", matches)
			}
			want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", matches[0]).stdout, "\n"), "\n")
			got := storedLines(t, rl.data, session)
			// ccrelay closes the last turn when Claude exits; the
			// transcript does not say so, and replay leaves it open.
			if len(got) != len(want)+1 || !strings.Contains(got[len(got)-1], `"t":"turn-end"`) {
				t.Fatalf("relay stored %d envelopes, replay has %d (+1 turn-end)", len(got), len(want))
			}
			sameEnvelopes(t, got[:len(want)], want)
			t.Logf("%d envelopes, crashed: CLI %v, relay %d times", len(got), crashed, rl.crashes)
		})
	}
}

// sameEnvelopes fails unless got and want are the same envelopes in the
// same order: byte for byte, but for the time of a turn-end, which ccrelay
// takes from the clock when Claude exits and replay from the next record.
func sameEnvelopes(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("relay stored %d envelopes, replay has %d", len(got), len(want))
	}
	timeless := regexp.MustCompile(`"time":[0-9]+,`)
	for i := range got {
		g, w := got[i], want[i]
		if strings.Contains(w, `"t":"turn-end"`) {
			g, w = timeless.ReplaceAllString(g, ""), timeless.ReplaceAllString(w, "")
		}
		if g != w {
			t.Fatalf("envelope %d:\n relay  %.300s\n replay %.300s", i+1, got[i], want[i])
		}
	}
}
