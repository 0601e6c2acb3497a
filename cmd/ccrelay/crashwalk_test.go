package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
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
func waitCLI(t *testing.T, cmd *exec.Cmd, rl *crashRelay, stderr *testutil.SyncBuffer) bool {
	t.Helper()
	crashed, err := waitRun(cmd, func() { rl.revive() }, time.After(60*time.Second), stderr)
	if err != nil {
		t.Fatal(err)
	}
	return crashed
}

// waitRun waits for a run to end, calling revive every 20 ms meanwhile,
// and reports whether it was killed by its crash point. When timeout
// fires first it kills the run and fails with what the run wrote on
// stderr: the run's output is still being copied into stderr then (by
// cmd.Wait, which has not returned), so stderr is a SyncBuffer.
func waitRun(cmd *exec.Cmd, revive func(), timeout <-chan time.Time, stderr *testutil.SyncBuffer) (bool, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // ends with the run (killed on the timeout)
	for {
		select {
		case err := <-done:
			if killed(cmd) {
				return true, nil
			}
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				return false, fmt.Errorf("ccrelay: %w", err)
			}
			if err != nil {
				return false, fmt.Errorf("ccrelay: %w\n%s", err, stderr)
			}
			return false, nil
		case <-timeout:
			cmd.Process.Kill()
			return false, fmt.Errorf("ccrelay did not end\n%s", stderr)
		case <-time.After(20 * time.Millisecond):
			revive()
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
// first hit (renamed: the three durable replaces after the first,
// whichever files they are; the first is the outbox naming its relay as it
// opens, before Claude starts, which TestCrashNamingTheRelay walks).
var crashSteps = []string{crashpoint.ScannerDelivered, crashpoint.OutboxWritten, crashpoint.OutboxSynced, crashpoint.RelayCommitted,
	crashpoint.OutboxAcked, crashpoint.OutboxCompacted, crashpoint.Renamed + "@2", crashpoint.Renamed + "@3", crashpoint.Renamed + "@4"}

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
			stderr := &testutil.SyncBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := readPID(t, r.pidfile)
			crashed := waitCLI(t, cmd, rl, stderr)
			waitGone(t, pid)
			if !crashed && rl.crashes == 0 {
				t.Fatalf("step %s was never reached", step)
			}
			// Again, resumed: the user types once more.
			b, _ := json.Marshal(map[string]any{"lines": append([]string{userLine("u2", 1, "second")}, bigLines(30, 33, 100)...)})
			os.WriteFile(r.script, b, 0o644)
			os.Remove(r.pidfile)
			cmd = r.command("--relay", rl.base, "--relay-token", rl.token, "--", "--resume", session)
			stderr = &testutil.SyncBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if waitCLI(t, cmd, rl, stderr) {
				t.Fatal("the second run crashed")
			}
			got := storedAsReplay(t, r, rl, session)
			t.Logf("%d envelopes, crashed: CLI %v, relay %d times", len(got), crashed, rl.crashes)
		})
	}
}

// sameEnvelopes fails unless got and want are the same envelopes in the
// same order: byte for byte, but for the time of a turn-end, which ccrelay
// takes from the clock when Claude exits and replay from the next record,
// and times within a second of each other.
func sameEnvelopes(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("relay stored %d envelopes, replay has %d", len(got), len(want))
	}
	timeless := regexp.MustCompile(`"time":([0-9]+),`)
	for i := range got {
		g, w := got[i], want[i]
		if strings.Contains(w, `"t":"turn-end"`) {
			g, w = timeless.ReplaceAllString(g, ""), timeless.ReplaceAllString(w, "")
		} else if gt, wt := timeless.FindStringSubmatch(g), timeless.FindStringSubmatch(w); gt != nil && wt != nil && gt[1] != wt[1] {
			// A prompt's time can come from the stream's copy or the
			// transcript's, written moments apart: the same envelope
			// otherwise, within a second.
			a, _ := strconv.ParseInt(gt[1], 10, 64)
			b, _ := strconv.ParseInt(wt[1], 10, 64)
			if a-b < 1000 && b-a < 1000 {
				g, w = timeless.ReplaceAllString(g, ""), timeless.ReplaceAllString(w, "")
			}
		}
		if g != w {
			t.Fatalf("envelope %d:\n relay  %.300s\n replay %.300s", i+1, got[i], want[i])
		}
	}
}

// crashSession drives one session through ccrelay processes against a
// crashRelay, with prompts from an app.
type crashSession struct {
	t                     *testing.T
	rl                    *crashRelay
	home, project, state  string
	stream, local, pidlog string
	session               string
	stderr                *testutil.SyncBuffer // the running ccrelay's
	told                  string               // the first status of the last prompt
}

func newCrashSession(t *testing.T, rl *crashRelay, session string) *crashSession {
	buildFakeClaude(t)
	s := &crashSession{t: t, rl: rl, home: t.TempDir(), project: t.TempDir(), state: t.TempDir(), session: session}
	// Three texts of 400 KB a turn: the outbox passes its compaction size
	// in the first turn.
	big := strings.Repeat("x", 400<<10)
	turn := func(k string) map[string]any {
		return map[string]any{"steps": []any{
			map[string]any{"text": "answer " + k + " " + big},
			map[string]any{"tool": map[string]any{"id": "toolu_" + k, "name": "Bash", "input": map[string]any{"command": "ls"}, "result": "ran " + k}},
			map[string]any{"text": "more " + k + " " + big},
			map[string]any{"text": "done " + k + " " + big},
		}}
	}
	b, _ := json.Marshal(map[string]any{"turns": []any{turn("1"), turn("2"), turn("3")}})
	s.stream = filepath.Join(s.state, "stream.json")
	os.WriteFile(s.stream, b, 0o644)
	b, _ = json.Marshal(map[string]any{"lines": append([]string{userLine("lu-{{source}}", 0, "typed in the terminal")}, bigLines(0, 8, 2000)...),
		"intervalMs": 2, "hang": true})
	s.local = filepath.Join(s.state, "local.json")
	os.WriteFile(s.local, b, 0o644)
	return s
}

// start runs ccrelay with args (and the crash point, if any).
func (s *crashSession) start(point string, args ...string) (*exec.Cmd, *testutil.SyncBuffer) {
	args = append([]string{"--claude", fakeClaude, "--state", filepath.Join(s.state, "ccrelay"), "--relay", s.rl.base, "--relay-token", s.rl.token}, args...)
	cmd := exec.Command(binary, args...)
	cmd.Dir = s.project
	cmd.Env = []string{"HOME=" + s.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_STREAM=" + s.stream, "FAKE_CLAUDE_SCRIPT=" + s.local}
	if point != "" {
		cmd.Env = append(cmd.Env, crashpoint.Env+"="+point)
	}
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.stderr = stderr
	return cmd, stderr
}

// until waits for cond or for cmd to end (then it reports true: the run
// ended, crashed or not), reviving the relay meanwhile.
func (s *crashSession) until(what string, cmd *exec.Cmd, exited <-chan struct{}, cond func() bool) bool {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s.rl.revive()
		select {
		case <-exited:
			return true
		default:
		}
		if cond() {
			return false
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited // stderr is whole, and no longer written
			logged, _ := os.ReadFile(filepath.Join(s.state, "ccrelay", "ccrelay.log"))
			s.t.Fatalf("waiting for %s\nthe prompt: %s\nrelay: %s\nccrelay: %s\nlog:\n%s", what, s.told, storedKinds(storedLines(s.t, s.rl.data, s.session)), s.stderr, logged)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// prompt sends a prompt from an app and waits until the relay took it.
func (s *crashSession) prompt(text string) {
	s.t.Helper()
	for attempt := 0; ; attempt++ {
		s.rl.revive()
		if err := s.tryPrompt(text); err == nil {
			return
		} else if attempt == 100 {
			s.t.Fatalf("prompt %q: %v", text, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *crashSession) tryPrompt(text string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	app, _, err := websocket.Dial(ctx, strings.Replace(s.rl.base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.rl.token}}})
	if err != nil {
		return err
	}
	defer app.CloseNow()
	app.SetReadLimit(relayMaxFrame)
	id := protocol.DeriveID(s.session, "prompt", text)
	b, _ := json.Marshal(protocol.Frame{V: protocol.FrameVersion, Type: protocol.FrameCommand, Session: s.session, Command: &protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: text}})
	if err := app.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	for {
		_, data, err := app.Read(ctx)
		if err != nil {
			return err
		}
		var f protocol.Frame
		json.Unmarshal(data, &f)
		if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == id {
			s.told = string(f.Status) + " " + f.Message
			return nil
		}
		if f.Type == protocol.FrameError {
			return fmt.Errorf("%s: %s", f.Code, f.Message)
		}
	}
}

func (s *crashSession) turnEnds() int {
	n := 0
	for _, l := range storedLines(s.t, s.rl.data, s.session) {
		if strings.Contains(l, `"t":"turn-end"`) {
			n++
		}
	}
	return n
}

// stop ends a run that is still going (SIGTERM) and reports whether it
// was killed by its crash point.
func (s *crashSession) stop(cmd *exec.Cmd, exited <-chan struct{}, stderr *testutil.SyncBuffer) bool {
	s.t.Helper()
	select {
	case <-exited:
	default:
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			s.t.Fatalf("ccrelay did not stop\n%s", stderr)
		}
	}
	return killed(cmd)
}

func waitChan(cmd *exec.Cmd) <-chan struct{} {
	c := make(chan struct{})
	go func() { cmd.Wait(); close(c) }()
	return c
}

// check compares the relay's copy with replay of the transcript: equal,
// but that the relay may hold one turn-end more at the end (the last
// turn's end came from Claude's result or exit, which the transcript does
// not hold).
//
// When Claude was killed with a crashed CLI, the relay may also hold the
// envelopes of messages Claude printed and had not written yet (it prints a
// message before it writes it): one run of envelopes replay does not have,
// none of them lost.
func (s *crashSession) check(crashed bool) {
	s.t.Helper()
	projectDir, err := claude.ProjectDir(filepath.Join(s.home, ".claude"), s.project)
	if err != nil {
		s.t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(run(s.t, "replay", "--format", "jsonl", "-q", claude.TranscriptPath(projectDir, s.session)).stdout, "\n"), "\n")
	got := storedLines(s.t, s.rl.data, s.session)
	if crashed {
		var printed []string
		if got, printed = withoutUnwritten(got, want); len(printed) > 0 {
			s.t.Logf("the relay holds %d envelopes of messages Claude printed and did not write before it was killed: %s", len(printed), storedKinds(printed))
		}
	}
	if len(got) == len(want)+1 && strings.Contains(got[len(got)-1], `"t":"turn-end"`) {
		got = got[:len(want)]
	}
	if len(got) != len(want) {
		s.t.Fatalf("relay stored %d envelopes, replay has %d\nrelay  %s\nreplay %s", len(got), len(want), storedKinds(got), storedKinds(want))
	}
	sameEnvelopes(s.t, got, want)
}

// withoutUnwritten returns got without the envelopes replay does not have
// (by id), and those, if they are one run; otherwise got as it is.
func withoutUnwritten(got, want []string) (rest, extra []string) {
	id := func(l string) string {
		var e protocol.Envelope
		json.Unmarshal([]byte(l), &e)
		return e.ID
	}
	have := map[string]bool{}
	for _, l := range want {
		have[id(l)] = true
	}
	first, last := -1, -1
	for i, l := range got {
		if have[id(l)] || strings.Contains(l, `"t":"turn-end"`) {
			continue // a turn's end may come from the stream only
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	if first < 0 {
		return got, nil
	}
	for _, l := range got[first : last+1] {
		if have[id(l)] {
			return got, nil // not one run
		}
	}
	return slices.Concat(got[:first], got[last+1:]), got[first : last+1]
}

// storedKinds describes stored envelopes, one word each.
func storedKinds(ls []string) string {
	var k []string
	for _, l := range ls {
		var e protocol.Envelope
		json.Unmarshal([]byte(l), &e)
		k = append(k, describeEnv(e))
	}
	return strings.Join(k, " ")
}

func describeEnv(e protocol.Envelope) string {
	d := string(e.Ev.T)
	if e.Ev.T == protocol.KindText {
		d += "(" + e.Ev.Text[:min(len(e.Ev.Text), 20)] + ")"
	}
	if e.Ev.T == protocol.KindTurnEnd {
		d += "(" + string(e.Ev.Status) + ")"
	}
	return d
}

// relayMaxFrame is the read limit of the test's app connections.
const relayMaxFrame = 16 << 20

// Every crash point for a remote session (ccrelay --remote, prompts from
// the app) and for a switching one (local in the terminal, then a prompt
// from the app): the CLI or the relay is killed at the step, ccrelay runs
// again (remote) for one more prompt, and the relay ends with replay of the
// transcript.
func TestCrashPointsRemoteAndSwitching(t *testing.T) {
	steps := append(slices.Clone(crashSteps[:len(crashSteps)-2]), crashpoint.SwitchFlushed, crashpoint.SwitchClosed)
	for _, kind := range []string{"remote", "switching"} {
		for _, step := range steps {
			if kind == "remote" && strings.HasPrefix(step, "switch-") {
				continue // no switch in a remote session
			}
			t.Run(kind+"/"+step, func(t *testing.T) {
				const session = "34343434-2222-4333-8444-555555555555"
				relayPoint, cliPoint := "", step
				if step == crashpoint.RelayCommitted {
					relayPoint, cliPoint = step, ""
				}
				rl := startCrashRelay(t, relayPoint)
				s := newCrashSession(t, rl, session)
				var cmd *exec.Cmd
				var stderr *testutil.SyncBuffer
				if kind == "remote" {
					cmd, stderr = s.start(cliPoint, "--remote", "--session", session)
				} else {
					cmd, stderr = s.start(cliPoint, "--", "--session-id", session)
				}
				exited := waitChan(cmd)
				ended := false
				if kind == "switching" {
					ended = s.until("the terminal's records", cmd, exited, func() bool { return len(storedLines(t, rl.data, session)) >= 9 })
				}
				if !ended {
					s.prompt("one")
					ended = s.until("the first app turn", cmd, exited, func() bool { return s.turnEnds() >= map[string]int{"remote": 1, "switching": 2}[kind] })
				}
				crashed := s.stop(cmd, exited, stderr)
				if !crashed && rl.crashes == 0 {
					t.Fatalf("step %s was never reached\n%s", step, stderr)
				}
				// Again, remote, for one more prompt.
				before := s.turnEnds()
				cmd, stderr = s.start("", "--remote", "--session", session)
				exited = waitChan(cmd)
				s.prompt("two")
				if s.until("the second app turn", cmd, exited, func() bool { return s.turnEnds() > before }) {
					t.Fatalf("the second run ended\n%s", stderr)
				}
				if s.stop(cmd, exited, stderr) {
					t.Fatal("the second run crashed")
				}
				s.check(crashed)
				t.Logf("%d envelopes; crashed: CLI %v, relay %d times", len(storedLines(t, rl.data, session)), crashed, rl.crashes)
			})
		}
	}
}

// The first durable replace of a run is the outbox naming its relay as it
// opens, before Claude starts: ccrelay killed there has started nothing,
// and the next run relays the whole session.
func TestCrashNamingTheRelay(t *testing.T) {
	buildFakeClaude(t)
	const session = "56565656-2222-4333-8444-555555555555"
	rl := startCrashRelay(t, "")
	r := newLocalRun(t, append([]string{userLine("u1", 0, "first")}, bigLines(0, 3, 100)...), map[string]any{"intervalMs": 2})
	cmd := r.command("--relay", rl.base, "--relay-token", rl.token, "--", "--session-id", session)
	cmd.Env = append(cmd.Env, crashpoint.Env+"="+crashpoint.Renamed)
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitCLI(t, cmd, rl, stderr) {
		t.Fatalf("ccrelay was not killed at its first durable replace\n%s", stderr)
	}
	if _, err := os.Stat(r.pidfile); err == nil {
		t.Fatal("Claude started before the outbox named its relay")
	}
	cmd = r.command("--relay", rl.base, "--relay-token", rl.token, "--", "--session-id", session)
	stderr = &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if waitCLI(t, cmd, rl, stderr) {
		t.Fatal("the second run crashed")
	}
	storedAsReplay(t, r, rl, session)
}

// storedAsReplay fails unless the relay holds `ccrelay replay` of the
// session's transcript and the turn-end ccrelay adds when Claude exits
// (the transcript does not say so, and replay leaves the turn open); it
// returns what the relay holds.
func storedAsReplay(t *testing.T, r *localRun, rl *crashRelay, session string) []string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
	if len(matches) != 1 {
		t.Fatalf("transcript: %v", matches)
	}
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", matches[0]).stdout, "\n"), "\n")
	got := storedLines(t, rl.data, session)
	if len(got) != len(want)+1 || !strings.Contains(got[len(got)-1], `"t":"turn-end"`) {
		t.Fatalf("relay stored %d envelopes, replay has %d (+1 turn-end)\ngot:\n%s\nwant:\n%s", len(got), len(want), shortLines(got), shortLines(want))
	}
	sameEnvelopes(t, got[:len(want)], want)
	return got
}

// shortLines is ls with each line cut to 160 bytes, for a failure message.
func shortLines(ls []string) string {
	var b strings.Builder
	for _, l := range ls {
		if len(l) > 160 {
			l = l[:160]
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
