package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/config"
)

// runEnv runs ccrelay with exactly env (no CCRELAY_* of the test's own).
func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	res := result{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return res
}

// A second machine logs in once with a state folder of its own: the relay
// is remembered there (0600, versioned), its credential is read from that
// folder, status says where sessions go and that the relay answers, and
// plain ccrelay relays with no flag. $CCRELAY_RELAY overrides the
// remembered relay. Without the fix, replay --to with --state X said "no
// relay token" (only the default state folder was looked in), and plain
// ccrelay recorded to a file.
func TestRememberedRelay(t *testing.T) {
	data, stateA, stateB := t.TempDir(), t.TempDir(), t.TempDir()
	srv, base, _ := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	home := t.TempDir() // nothing in the default folders: no token found there
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}

	res := runEnv(t, env, "pair", "--machine", "--relay", base, "--data", data, "--state", stateA)
	mc := regexp.MustCompile(`ccrelay login (\S+) ([0-9A-Z]+)`).FindStringSubmatch(res.stdout)
	if res.code != 0 || mc == nil {
		t.Fatalf("pair --machine: %+v", res)
	}
	if c, err := config.Load(stateA); err != nil || c.Relay != base {
		t.Errorf("pair did not remember the relay: %+v, %v", c, err)
	}
	res = runEnv(t, env, "login", mc[1], mc[2], "--state", stateB, "--name", "desk")
	if res.code != 0 || !strings.Contains(res.stdout, "remembered") {
		t.Fatalf("login: %+v", res)
	}
	fi, err := os.Stat(config.Path(stateB))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v, %v", fi, err)
	}
	b, _ := os.ReadFile(config.Path(stateB))
	var c config.Config
	if err := json.Unmarshal(b, &c); err != nil || c.Version != config.Version || c.Relay != base {
		t.Fatalf("config file: %s (%v)", b, err)
	}

	res = runEnv(t, env, "status", "--state", stateB)
	for _, want := range []string{"sessions: relayed to " + base + " (from the relay remembered in " + config.Path(stateB) + ")",
		"relay: answers", `credential: this machine's login as "desk"`} {
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Errorf("status: %+v\nwant %q", res, want)
		}
	}

	// The login's credential is read from --state.
	session := pacedSession(t, 2)
	res = runEnv(t, env, "replay", "--format", "jsonl", "--to", base, "--state", stateB, session)
	if res.code != 0 || !strings.Contains(res.stderr, "sent ") {
		t.Fatalf("replay --to with the login of --state: %+v", res)
	}
	if got := storedLines(t, data, strings.TrimSuffix(filepath.Base(session), ".jsonl")); len(got) == 0 {
		t.Fatal("replay --to stored nothing")
	}

	// Plain ccrelay relays.
	const id = "11111111-2222-4333-8444-666666666666"
	lines := append([]string{`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"hi"}}`}, recLines(1, 3)...)
	r := newLocalRun(t, lines, nil)
	cmd := exec.Command(binary, "--claude", fakeClaude, "--state", stateB, "--", "--session-id", id)
	cmd.Dir = r.project
	cmd.Env = append(env, "FAKE_CLAUDE_SCRIPT="+r.script, "FAKE_CLAUDE_PIDFILE="+r.pidfile)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "relaying to "+base) {
		t.Fatalf("plain ccrelay: %v\n%s", err, out)
	}
	if got := storedLines(t, data, id); len(got) != 5 {
		t.Fatalf("relay stored %d envelopes of plain ccrelay's session: %v", len(got), got)
	}

	// $CCRELAY_RELAY wins over the remembered relay; --relay over both.
	res = runEnv(t, append(env, config.EnvRelay+"=http://127.0.0.1:1"), "status", "--state", stateB)
	if !strings.Contains(res.stdout, "relayed to http://127.0.0.1:1 (from $CCRELAY_RELAY)") || !strings.Contains(res.stdout, "does not answer: connection refused") {
		t.Errorf("status with %s: %+v", config.EnvRelay, res)
	}
	res = runEnv(t, append(env, config.EnvRelay+"=http://127.0.0.1:1"), "status", "--state", stateB, "--relay", base)
	if !strings.Contains(res.stdout, "relayed to "+base+" (from --relay)") || !strings.Contains(res.stdout, "relay: answers") {
		t.Errorf("status with --relay: %+v", res)
	}
}

// The daemon says the app can reach this machine only once the relay took
// its connection: with the relay down it says why it cannot reach it, and
// the line comes when the relay is back. Without the fix the daemon said
// "reachable from the app" at start while the relay was down.
func TestDaemonReachableOnlyWhenConnected(t *testing.T) {
	r := newDaemonRig(t)
	r.relay.Process.Signal(syscall.SIGTERM)
	r.relay.Wait()
	args := []string{"daemon", "--relay", r.base, "--relay-token-file", r.tokenFile, "--state", r.state, "--claude", fakeClaude, "--allow", r.root}
	r.daemon = exec.Command(binary, args...)
	r.daemon.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin"}
	errs := watchStderr(t, r.daemon)
	if err := r.daemon.Start(); err != nil {
		t.Fatal(err)
	}
	errs.waitFor(t, "cannot reach the relay at "+r.base+": connection refused")
	for _, l := range errs.all {
		if strings.Contains(l, "reachable from the app") {
			t.Fatalf("said while the relay is down: %q", l)
		}
	}
	r.relay = restartServe(t, r.data, r.addr)
	errs.waitFor(t, "reachable from the app through "+r.base)
}

// Headless with a token the relay refuses, ccrelay ends and says what to
// do; without the fix it waited forever for a prompt that could not come.
func TestRemoteRefusedTokenEnds(t *testing.T) {
	buildFakeClaude(t)
	data := t.TempDir()
	srv, base, _ := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "--remote", "--relay", base, "--relay-token-file", tok, "--state", t.TempDir(), "--claude", fakeClaude)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("still waiting after %v:\n%s", time.Since(start), out)
	}
	if err == nil || !strings.Contains(string(out), "refused the token") || !strings.Contains(string(out), "run ccrelay login again") {
		t.Fatalf("exit %v:\n%s", err, out)
	}
	t.Logf("ended %v after start", time.Since(start).Round(time.Millisecond))
}

// replay --to waits for the relay at the end (until it confirms nothing
// for replayStall); that wait is
// not silent: after finishSay it says what it waits for and why the relay
// has not taken it, though the first notice is screens above under the
// session's output. Without the fix nothing was said after the summary.
func TestReplayToSaysWhatItWaitsFor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	cmd := exec.Command(binary, "replay", "--format", "jsonl", "--to", closed, "--relay-token", "t", "--state", t.TempDir(), bigSession(t))
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	errs := watchStderr(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	errs.waitFor(t, "wrote ") // the summary: the session's output is done
	errs.waitFor(t, "waiting for the relay to take")
	last := errs.all[len(errs.all)-1]
	if !strings.Contains(last, "cannot reach the relay at "+closed+": connection refused") || !strings.Contains(last, "Ctrl-C stops") ||
		!strings.Contains(last, "given up once it confirms nothing for 30s") {
		t.Errorf("the wait says %q", last)
	}
}

// The remembered CA file is trusted for the remembered relay only: a
// relay given with --relay or $CCRELAY_RELAY is checked against the
// system's authorities (or SSL_CERT_FILE), so that the holder of a private
// authority one relay was reached with cannot stand in for another relay
// (and learn its token). Without the fix the CA file was read (and
// trusted, for every request of the process) whatever the relay: here a
// missing one made each of these fail.
func TestRememberedCAOnlyForItsRelay(t *testing.T) {
	state := t.TempDir()
	const mine, other = "https://mine.example:8707", "https://other.example"
	missing := filepath.Join(t.TempDir(), "gone-ca.pem")
	if err := config.Remember(state, mine, missing); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvRelay, "")
	if url, _, err := chooseRelay(other, state); err != nil || url != other {
		t.Fatalf("--relay %s: %q, %v; want it without the remembered CA", other, url, err)
	}
	t.Setenv(config.EnvRelay, other)
	if url, _, err := chooseRelay("", state); err != nil || url != other {
		t.Fatalf("$%s=%s: %q, %v; want it without the remembered CA", config.EnvRelay, other, url, err)
	}
	// The remembered relay, however it is named, uses its CA file.
	for _, name := range []string{"", mine, mine + "/"} {
		t.Setenv(config.EnvRelay, "")
		if _, _, err := chooseRelay(name, state); err == nil || !strings.Contains(err.Error(), "CA file") {
			t.Fatalf("the remembered relay (flag %q) did not use its CA file: %v", name, err)
		}
	}
}
