package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// A follower follows its session's transcript while its Claude runs (what
// is written later reaches the relay too), the app sees it as followed and
// each command it sends is rejected with how to steer the session, a
// second follower of the same session leaves it to the first, and the follower ends once its Claude
// has ended, with the relay holding what replay maps of the transcript and
// the turn closed.
func TestFollowSessionLive(t *testing.T) {
	data, state, home := t.TempDir(), t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := config.Remember(state, base, ""); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(t.TempDir(), "project")
	os.MkdirAll(cwd, 0o755)
	const session = "f0110ede-0000-4000-8000-00000000000a"
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), cwd)
	if err != nil {
		t.Fatal(err)
	}
	transcript := claude.TranscriptPath(projectDir, session)
	os.MkdirAll(projectDir, 0o700)
	appendLines := func(lines ...string) {
		f, err := os.OpenFile(transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			f.WriteString(strings.ReplaceAll(l, "{{session}}", session) + "\n")
		}
		f.Close()
	}
	appendLines(`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"hi"}}`)

	// Claude, for the follower: a process that runs until killed.
	fakeClaude := exec.Command("sleep", "600")
	if err := fakeClaude.Start(); err != nil {
		t.Fatal(err)
	}
	defer fakeClaude.Process.Kill()
	follower := func() *exec.Cmd {
		cmd := exec.Command(binary, "follow", "session", "--session", session, "--transcript", transcript, "--cwd", cwd,
			"--pid", strconv.Itoa(fakeClaude.Process.Pid), "--state", state)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CCRELAY_TOKEN=" + token}
		return cmd
	}
	first := follower()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Wait() }()
	defer first.Process.Kill()
	waitStored(t, data, session, 1)

	// A second follower of the session ends at once: the first has it.
	if out, err := follower().CombinedOutput(); err != nil {
		t.Fatalf("second follower: %v\n%s", err, out)
	}
	if !strings.Contains(followLogText(state), "the session is followed already") {
		t.Fatalf("the second follower did not leave the session to the first; log:\n%s", followLogText(state))
	}

	appendLines(recLines(1, 4)...)
	appendLines(`{"type":"assistant","uuid":"a4","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:04.000Z","message":{"id":"m4","model":"claude-sonnet-4-5","content":[{"type":"text","text":"t4"}]}}`)
	waitStored(t, data, session, 5)

	// The app sees it as followed and can send it nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	app := dialWSApp(t, ctx, base, token)
	app.until("the session listed as followed", func() bool { return app.info(session)["mode"] == ModeFollowed })
	// Its model, as the transcript names it, prices its usage in the app.
	app.until("the followed session's model announced", func() bool { return app.info(session)["model"] == "claude-sonnet-4-5" })
	if reason := app.command(session, protocol.Command{Kind: protocol.CommandPrompt, Text: "take over"}); !strings.Contains(reason, "only follows") ||
		!strings.Contains(reason, "ccrelay --resume "+session) {
		t.Fatalf("a prompt to a followed session: %q; want it rejected with how to steer it", reason)
	}
	select {
	case err := <-firstDone:
		t.Fatalf("the follower ended while its Claude runs: %v\n%s", err, followLogText(state))
	default:
	}

	fakeClaude.Process.Kill()
	fakeClaude.Wait()
	select {
	case err := <-firstDone:
		if err != nil {
			t.Fatalf("follower: %v\n%s", err, followLogText(state))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the follower did not end with its Claude; log:\n%s", followLogText(state))
	}
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", transcript).stdout, "\n"), "\n")
	got := storedLines(t, data, session)
	if len(got) != len(want)+1 || !strings.Contains(got[len(got)-1], `"t":"turn-end"`) {
		t.Fatalf("relay stored %d envelopes, replay has %d (+1 turn-end)\ngot:\n%s\nwant:\n%s", len(got), len(want), shortLines(got), shortLines(want))
	}
	sameEnvelopes(t, got[:len(want)], want)
}

// Nothing is lost when the relay is down as a followed Claude ends: the
// follower keeps what it could not send in the folder's outbox, and the
// next follower in the folder (here, of the session resumed) sends it
// with the rest once the relay is back.
func TestFollowSessionRelayDownAtEnd(t *testing.T) {
	data, state, home := t.TempDir(), t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	if err := config.Remember(state, base, ""); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(t.TempDir(), "project")
	os.MkdirAll(cwd, 0o755)
	const session = "f0110ede-0000-4000-8000-00000000000b"
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), cwd)
	if err != nil {
		t.Fatal(err)
	}
	transcript := claude.TranscriptPath(projectDir, session)
	os.MkdirAll(projectDir, 0o700)
	appendLines := func(lines ...string) {
		f, err := os.OpenFile(transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			f.WriteString(strings.ReplaceAll(l, "{{session}}", session) + "\n")
		}
		f.Close()
	}
	follow := func(pid int) {
		t.Helper()
		cmd := exec.Command(binary, "follow", "session", "--session", session, "--transcript", transcript, "--cwd", cwd,
			"--pid", strconv.Itoa(pid), "--state", state, "--flush-timeout", "1s")
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CCRELAY_TOKEN=" + token}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("follower: %v\n%s", err, out)
		}
	}
	// Claude ended before its follower looked (pid 0: at once): what the
	// transcript holds is read, and cannot be sent.
	appendLines(append([]string{`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"hi"}}`}, recLines(1, 3)...)...)
	follow(0)
	if !strings.Contains(followLogText(state), "not all sent; kept for the next ccrelay in this folder") {
		t.Fatalf("the follower did not keep what it could not send; log:\n%s", followLogText(state))
	}
	if n := len(storedLines(t, data, session)); n != 0 {
		t.Fatalf("the relay stored %d envelopes while down", n)
	}

	// The relay is back, the session resumed, and followed again.
	srv = restartServe(t, data, strings.TrimPrefix(base, "http://"))
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	appendLines(`{"type":"user","uuid":"u2","sessionId":"{{session}}","timestamp":"2026-11-22T10:01:00.000Z","message":{"role":"user","content":"again"}}`)
	appendLines(recLines(3, 5)...)
	follow(0)
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", transcript).stdout, "\n"), "\n")
	got := storedLines(t, data, session)
	// The first run ended its open turn with the id replay gives it when
	// the next prompt comes; the second ends the last one.
	if len(got) != len(want)+1 || !strings.Contains(got[len(got)-1], `"t":"turn-end"`) {
		t.Fatalf("relay stored %d envelopes, replay has %d (+1 turn-end)\ngot:\n%s\nwant:\n%s\nlog:\n%s", len(got), len(want), shortLines(got), shortLines(want), followLogText(state))
	}
	sameEnvelopes(t, got[:len(want)], want)
}

// A follower stopped while its Claude runs on in the middle of a turn (a
// Bash call without its result yet): killed, or ended by a signal. The
// next follower of the session (the hook starts one at Claude's next
// SessionStart) takes the turn up where the transcript has it: the call
// ends once, with the result Claude recorded, the turn goes on and ends
// where replay ends it; the relay holds what replay maps of the
// transcript, one open turn at a time.
func TestFollowSessionRestartedMidTurn(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { followRestartedMidTurn(t, sig) })
	}
}

func followRestartedMidTurn(t *testing.T, sig syscall.Signal) {
	data, state, home := t.TempDir(), t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := config.Remember(state, base, ""); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(t.TempDir(), "project")
	os.MkdirAll(cwd, 0o755)
	const session = "f0110ede-0000-4000-8000-00000000000b"
	projectDir, err := claude.ProjectDir(filepath.Join(home, ".claude"), cwd)
	if err != nil {
		t.Fatal(err)
	}
	transcript := claude.TranscriptPath(projectDir, session)
	os.MkdirAll(projectDir, 0o700)
	appendLines := func(lines ...string) {
		f, err := os.OpenFile(transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			f.WriteString(strings.ReplaceAll(l, "{{session}}", session) + "\n")
		}
		f.Close()
	}
	appendLines(
		`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:00.000Z","message":{"role":"user","content":"run it"}}`,
		`{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:01.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Running."}]}}`,
		`{"type":"assistant","uuid":"a2","parentUuid":"a1","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:02.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_f1","name":"Bash","input":{"command":"make"}}]}}`)

	fakeClaude := exec.Command("sleep", "600")
	if err := fakeClaude.Start(); err != nil {
		t.Fatal(err)
	}
	defer fakeClaude.Process.Kill()
	follower := func() (*exec.Cmd, <-chan struct{}) {
		cmd := exec.Command(binary, "follow", "session", "--session", session, "--transcript", transcript, "--cwd", cwd,
			"--pid", strconv.Itoa(fakeClaude.Process.Pid), "--state", state)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CCRELAY_TOKEN=" + token}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		return cmd, done
	}
	ended := func(done <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("the follower did not end %s; log:\n%s", what, followLogText(state))
		}
	}
	first, firstDone := follower()
	waitStored(t, data, session, 4) // the prompt, the turn's start, the text, the call
	// The open turn is kept beside the follower's cursor.
	deadline := time.Now().Add(30 * time.Second)
	for {
		kept, _ := filepath.Glob(filepath.Join(state, "projects", "*", launcher.TurnsFile))
		if len(kept) > 0 {
			if b, _ := os.ReadFile(kept[0]); strings.Contains(string(b), "toolu_f1") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no open turn kept; log:\n%s", followLogText(state))
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Process.Signal(sig)
	ended(firstDone, "on "+sig.String())

	// Claude goes on meanwhile; the next follower takes the session up.
	appendLines(
		`{"type":"user","uuid":"u2","parentUuid":"a2","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:03.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_f1","content":"built"}]}}`,
		`{"type":"assistant","uuid":"a3","parentUuid":"u2","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:04.000Z","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"Built."}]}}`,
		`{"type":"user","uuid":"u3","parentUuid":"a3","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:05.000Z","message":{"role":"user","content":"next"}}`,
		`{"type":"assistant","uuid":"a4","parentUuid":"u3","sessionId":"{{session}}","timestamp":"2026-11-22T10:00:06.000Z","message":{"id":"m3","role":"assistant","content":[{"type":"text","text":"Done."}]}}`)
	_, secondDone := follower()
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", transcript).stdout, "\n"), "\n")
	waitStored(t, data, session, len(want))
	fakeClaude.Process.Kill()
	fakeClaude.Wait()
	ended(secondDone, "with its Claude")
	got := storedLines(t, data, session)
	if len(got) != len(want)+1 || !strings.Contains(got[len(got)-1], `"t":"turn-end"`) {
		t.Fatalf("relay stored %d envelopes, replay has %d (+1 turn-end)\ngot:\n%s\nwant:\n%s", len(got), len(want), shortLines(got), shortLines(want))
	}
	sameEnvelopes(t, got[:len(want)], want)
}
