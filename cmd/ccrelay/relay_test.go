package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/synth"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/relay"
)

// bigSession writes a session of well over 1,000 envelopes built from
// corpus records.
func bigSession(t *testing.T) string {
	t.Helper()
	src, err := synth.Load(corpus + "/public/spotter/test/fixtures/transcripts/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "0f0f0f0f-1111-4222-8333-444444444444.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Write(f, 8<<20, src); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func storedLines(t *testing.T, data, session string) []string {
	t.Helper()
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.Read(context.Background(), session, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		if r.Seq != int64(i+1) {
			t.Fatalf("gap: row %d has seq %d", i, r.Seq)
		}
		out[i] = string(r.Body)
	}
	return out
}

// ccrelay replay --to sends a session to a running relay; what the relay
// stores equals `ccrelay replay --format jsonl` of the same file, and
// replaying the same session again stores nothing twice.
func TestReplayToRelay(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	session := bigSession(t)
	id := strings.TrimSuffix(filepath.Base(session), ".jsonl")
	want := run(t, "replay", "--format", "jsonl", "-q", session)
	wantLines := strings.Split(strings.TrimSuffix(want.stdout, "\n"), "\n")
	if len(wantLines) < 1000 {
		t.Fatalf("only %d envelopes in the test session", len(wantLines))
	}
	state := t.TempDir()
	for range 2 { // (d) the same session replayed twice
		res := run(t, "replay", "--format", "jsonl", "--to", base, "--relay-token", token, "--state", state, session)
		if res.code != 0 || !strings.Contains(res.stderr, "sent ") {
			t.Fatalf("replay --to: exit %d\n%s", res.code, res.stderr)
		}
		sameLines(t, storedLines(t, data, id), wantLines)
	}
	// A wrong token is refused with a clear message.
	res := run(t, "replay", "-q", "--format", "jsonl", "--to", base, "--relay-token", "wrong", "--state", t.TempDir(), session)
	if res.code == 0 || !strings.Contains(res.stderr, "refused the token") {
		t.Fatalf("wrong token: exit %d\n%s", res.code, res.stderr)
	}
}

// pacedSession writes a session of pairs of prompt and answer, 4 ms apart,
// so a replay at --speed 1 takes a few seconds.
func pacedSession(t *testing.T, pairs int) string {
	t.Helper()
	return pacedSessionID(t, "1e1e1e1e-2222-4333-8444-555555555555", pairs)
}

// (b) The CLI is killed mid-stream and started again on the same state
// folder: the relay ends up with exactly the sequence replay prints.
func TestReplayToRelayCLIKilled(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	session := pacedSession(t, 300)
	id := strings.TrimSuffix(filepath.Base(session), ".jsonl")
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", session).stdout, "\n"), "\n")
	if len(want) < 1000 {
		t.Fatalf("only %d envelopes", len(want))
	}
	state := t.TempDir()
	args := []string{"replay", "-q", "--format", "jsonl", "--to", base, "--relay-token", token, "--state", state, "--speed", "1", session}
	for kill := range 3 {
		cmd := exec.Command(binary, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it once the relay has part of the session, more each time.
		waitStored(t, data, id, 200*(kill+1))
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	if res := run(t, args...); res.code != 0 {
		t.Fatalf("final run: exit %d %s", res.code, res.stderr)
	}
	sameLines(t, storedLines(t, data, id), want)
}

// sameLines fails unless the relay stored exactly the lines replay printed.
func sameLines(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("relay stored %d envelopes, replay has %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			k := 0
			for k < len(got[i]) && k < len(want[i]) && got[i][k] == want[i][k] {
				k++
			}
			lo := max(0, k-60)
			t.Fatalf("envelope %d differs at byte %d:\n relay  …%.160s\n replay …%.160s", i+1, k, got[i][lo:], want[i][lo:])
		}
	}
}

// Local mode with --relay: what Claude writes reaches the relay.
func TestLocalModeToRelay(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	const session = "11111111-2222-4333-8444-555555555555"
	lines := append([]string{`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"hi"}}`}, recLines(1, 3)...)
	r := newLocalRun(t, lines, nil)
	cmd := r.command("--relay", base, "--relay-token", token, "--", "--session-id", session)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ccrelay: %v\n%s", err, out)
	}
	got := storedLines(t, data, session)
	if len(got) != 5 || !strings.Contains(got[0], `"text":"hi"`) || !strings.Contains(got[4], `"turn-end"`) {
		t.Fatalf("relay stored %d: %v", len(got), got)
	}
	// The session was announced: local mode, its project folder.
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sessions, err := st.Sessions(context.Background())
	if err != nil || len(sessions) != 1 || !strings.Contains(string(sessions[0].Info), `"mode":"local"`) ||
		!strings.Contains(string(sessions[0].Info), filepath.Base(r.project)) {
		t.Fatalf("sessions %+v, %v", sessions, err)
	}
}

// A local-mode ccrelay that exits with its Claude closes its connection
// to the relay itself: the relay marks the session, once --cli-gone-after
// has passed, as one whose ccrelay stopped (cliStopped), not one whose
// machine went away, and keeps its status (idle).
func TestLocalModeExitSaysStopped(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data, "--cli-gone-after", "500ms")
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	const session = "11111111-2222-4333-8444-555555555556"
	lines := append([]string{`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"hi"}}`}, recLines(1, 3)...)
	r := newLocalRun(t, lines, nil)
	if out, err := r.command("--relay", base, "--relay-token", token, "--", "--session-id", session).CombinedOutput(); err != nil {
		t.Fatalf("ccrelay: %v\n%s", err, out)
	}
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var info map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sessions, err := st.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(sessions) == 1 {
			info = nil
			json.Unmarshal(sessions[0].Info, &info)
			if info["cliGone"] != nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never marked: %v", info)
		}
	}
	if info["cliStopped"] != true || info["mode"] != "local" || info["status"] != "idle" {
		t.Fatalf("after ccrelay exited, the session is listed as %v", info)
	}
}

// (c) ccrelay replay --to through a loopback proxy that cuts the
// connection at random points: the relay stores exactly what replay prints.
func TestReplayToRelayThroughCuttingProxy(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	proxy := testutil.StartCutProxy(t, strings.TrimPrefix(base, "http://"), 7, 100000, 300000)
	session := bigSession(t)
	id := strings.TrimSuffix(filepath.Base(session), ".jsonl")
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", session).stdout, "\n"), "\n")
	res := run(t, "replay", "-q", "--format", "jsonl", "--to", "http://"+proxy.Addr, "--relay-token", token, "--state", t.TempDir(), session)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if proxy.Cuts() < 3 {
		t.Fatalf("only %d cuts", proxy.Cuts())
	}
	sameLines(t, storedLines(t, data, id), want)
	t.Logf("%d envelopes through %d cuts", len(want), proxy.Cuts())
}

// (a) The relay is killed with SIGKILL mid-stream and restarted, several
// times, while ccrelay replay --to runs: the relay stores exactly what
// replay prints.
func TestReplayToRelayKilled(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	addr := strings.TrimPrefix(base, "http://")
	session := pacedSession(t, 300)
	id := strings.TrimSuffix(filepath.Base(session), ".jsonl")
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", session).stdout, "\n"), "\n")
	cli := exec.Command(binary, "replay", "-q", "--format", "jsonl", "--to", base, "--relay-token", token, "--state", t.TempDir(), "--speed", "1", session)
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	for kill := range 3 {
		waitStored(t, data, id, 250*(kill+1))
		srv.Process.Signal(syscall.SIGKILL)
		srv.Wait()
		srv = restartServe(t, data, addr)
	}
	if err := cli.Wait(); err != nil {
		t.Fatalf("replay --to: %v", err)
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	sameLines(t, storedLines(t, data, id), want)
}

// restartServe starts `ccrelay serve` again on the same address and data.
func restartServe(t *testing.T, data, addr string) *exec.Cmd {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cmd := exec.Command(binary, "serve", "--data", data, "--listen", addr)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		up := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "#token=") {
				up = true
				break
			}
		}
		go io.Copy(io.Discard, out)
		if up {
			return cmd
		}
		cmd.Wait() // the address was not free yet
		if time.Now().After(deadline) {
			t.Fatal("relay did not restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStored polls the relay's store until session has at least n envelopes.
func waitStored(t *testing.T, data, session string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(storedLines(t, data, session)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: fewer than %d envelopes stored", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
