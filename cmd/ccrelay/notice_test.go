package main

import (
	"bufio"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stderrLines collects a process's stderr lines as they come.
type stderrLines struct {
	lines chan string
	all   []string
}

func watchStderr(t *testing.T, cmd *exec.Cmd) *stderrLines {
	t.Helper()
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &stderrLines{lines: make(chan string, 1024)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		io.Copy(io.Discard, pr)
	}()
	return s
}

// waitFor reads lines until one contains want (or the deadline passes).
func (s *stderrLines) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("stderr ended without %q:\n%s", want, strings.Join(s.all, "\n"))
			}
			s.all = append(s.all, l)
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q on stderr:\n%s", want, strings.Join(s.all, "\n"))
		}
	}
}

// rest reads the remaining lines (the process ended).
func (s *stderrLines) rest() string {
	for l := range s.lines {
		s.all = append(s.all, l)
	}
	return strings.Join(s.all, "\n")
}

// stoppedRelay runs `ccrelay serve` once (for its token and address) and
// stops it: its address then refuses connections.
func stoppedRelay(t *testing.T) (data, base, token string) {
	data = t.TempDir()
	srv, base, token := startServe(t, data)
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	return data, base, token
}

// replay --to says at once when the relay cannot be reached (and why) and
// that it keeps trying, once; says when it is reached; and sends all.
func TestReplayToSaysWhenRelayUnreachable(t *testing.T) {
	data, base, token := stoppedRelay(t)
	session := pacedSession(t, 300)
	id := strings.TrimSuffix(filepath.Base(session), ".jsonl")
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", session).stdout, "\n"), "\n")
	cmd := exec.Command(binary, "replay", "-q", "--format", "jsonl", "--to", base, "--relay-token", token, "--state", t.TempDir(), session)
	errs := watchStderr(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	errs.waitFor(t, "cannot reach the relay at "+base+": connection refused")
	if !strings.Contains(errs.all[len(errs.all)-1], "retrying") {
		t.Fatalf("the notice does not say it keeps trying: %s", errs.all[len(errs.all)-1])
	}
	srv := restartServe(t, data, strings.TrimPrefix(base, "http://"))
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	errs.waitFor(t, "reached the relay at "+base)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("replay --to: %v\n%s", err, errs.rest())
	}
	if out := errs.rest(); strings.Count(out, "cannot reach") != 1 || strings.Count(out, "reached the relay") != 1 {
		t.Fatalf("not once each:\n%s", out)
	}
	sameLines(t, storedLines(t, data, id), want)
}

// Local mode tells when the relay cannot be reached, and why, without
// writing over Claude's screen: in its log at once, on stderr once Claude
// has exited (the last notice: here that the relay was reached again); what
// Claude wrote reaches the relay.
func TestLocalModeSaysWhenRelayUnreachable(t *testing.T) {
	data, base, token := stoppedRelay(t)
	const session = "33333333-2222-4333-8444-555555555555"
	r := newLocalRun(t, recLines(0, 5), map[string]any{"hang": true})
	cmd := r.command("--relay", base, "--relay-token", token, "--", "--session-id", session)
	cmd.Env = append(cmd.Env, "FAKE_CLAUDE_SCREEN=1")
	errs := watchStderr(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	errs.waitFor(t, screenOn)
	logFile := filepath.Join(r.state, "ccrelay.log")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if strings.Contains(string(b), "cannot reach the relay at "+base+": connection refused") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never said the relay cannot be reached:\n%s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv := restartServe(t, data, strings.TrimPrefix(base, "http://"))
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	waitStored(t, data, session, 5)
	cmd.Process.Signal(syscall.SIGTERM)
	out := errs.rest()
	cmd.Wait()
	checkScreen(t, out, "ccrelay: relaying to "+base)
	if after := out[strings.Index(out, screenOff):]; strings.Count(out, "cannot reach") > 1 || strings.Count(after, "reached the relay at "+base+" again") != 1 {
		t.Fatalf("stderr:\n%s", out)
	}
}

// Local mode against a relay whose certificate this machine does not trust
// says so, and the next step that works for it (plain ccrelay has no --ca:
// ccrelay pair or login with --ca FILE remembers the authority with the
// relay, or SSL_CERT_FILE), not that it retries until the relay answers;
// after pair --ca, plain ccrelay reaches the relay. Without the fix the
// hint was to pass --ca FILE, a flag plain ccrelay does not take.
func TestLocalModeSaysCertificateNotTrusted(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	writeFile(t, caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	cert, key, _ := ca.issue(t, dir, "relay", 2)
	data := t.TempDir()
	_, base, token := startServeTLS(t, data, "--tls-cert", cert, "--tls-key", key)
	const session = "33333333-2222-4333-8444-666666666666"
	r := newLocalRun(t, recLines(0, 5), map[string]any{"hang": true})
	cmd := r.command("--relay", base, "--relay-token", token, "--", "--session-id", session)
	errs := watchStderr(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	logFile := filepath.Join(r.state, "ccrelay.log")
	deadline := time.Now().Add(30 * time.Second)
	var said string
	for {
		b, _ := os.ReadFile(logFile)
		if i := strings.Index(string(b), "cannot reach the relay at "+base); i >= 0 {
			said, _, _ = strings.Cut(string(b[i:]), "\n")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never said the relay cannot be reached:\n%s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range []string{"not trusted by this machine", "--ca FILE to ccrelay pair or ccrelay login", "SSL_CERT_FILE", "sent once the certificate is accepted"} {
		if !strings.Contains(said, w) {
			t.Errorf("local mode said %q; want it to say %q", said, w)
		}
	}
	if strings.Contains(said, "until it answers") || strings.Contains(said, "x509:") {
		t.Errorf("local mode said %q: as if the relay were down, or Go's raw error", said)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	errs.rest()
	cmd.Wait()

	// The step it names: pair (on the relay's machine) with --ca remembers
	// the relay and its authority, and ccrelay then reaches it (--relay
	// here only because --out, which the test reads, records to a file
	// alone without it).
	pair := exec.Command(binary, "pair", "--no-wait", "--state", r.state, "--relay", base, "--ca", caFile, "--data", data)
	pair.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin"}
	if out, err := pair.CombinedOutput(); err != nil {
		t.Fatalf("pair --ca: %v\n%s", err, out)
	}
	cmd = r.command("--relay", base, "--relay-token", token, "--", "--session-id", session)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitStored(t, data, session, 5)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}
