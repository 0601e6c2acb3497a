package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/internal/hooksettings"
	"github.com/ccrelay/ccrelay/relay"
)

// The real Claude Code with the hook of ccrelay follow install: a plain
// `claude -p` session reaches the relay ccrelay remembers, as `ccrelay
// replay` maps its transcript, announced as followed; a session Claude
// runs under ccrelay is left to that ccrelay; ccrelay follow uninstall
// leaves the user's settings byte for byte as they were.
func TestRealClaudeFollowPlain(t *testing.T) {
	for _, in := range claudetest.Installs(t) {
		t.Run(in.Version, func(t *testing.T) { realClaudeFollowPlain(t, in.Path) })
	}
}

func realClaudeFollowPlain(t *testing.T, bin string) {
	const answer = "Followed from plain claude, every word."
	e := claudetest.NewWith(t, bin, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text(answer)}})
	data, state := t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := config.Remember(state, base, ""); err != nil {
		t.Fatal(err)
	}
	e.Extra = append(e.Extra, "CCRELAY_TOKEN="+token)

	settings := filepath.Join(e.Home, ".claude", "settings.json")
	before := "{\n  \"cleanupPeriodDays\": 30,\n  \"permissions\": {\n    \"allow\": [\"Read\"]\n  }\n}\n"
	if err := os.MkdirAll(filepath.Dir(settings), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	follow := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"follow"}, args...)...)
		cmd.Env = e.Environ()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ccrelay follow %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := follow("install", "--state", state); !strings.Contains(out, base) {
		t.Fatalf("install does not say where sessions go:\n%s", out)
	}
	if out := follow(); !strings.Contains(out, "are followed") {
		t.Fatalf("ccrelay follow after install: %s", out)
	}

	const session = "f0110ede-0000-4000-8000-000000000001"
	e.Run(t, nil, "-p", "hello from a plain terminal", "--session-id", session)
	waitFollowerGone(t, state, session)
	matches, _ := filepath.Glob(filepath.Join(e.Home, ".claude", "projects", "*", session+".jsonl"))
	if len(matches) != 1 {
		t.Fatalf("transcript: %v", matches)
	}
	want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", matches[0]).stdout, "\n"), "\n")
	got := storedLines(t, data, session)
	if len(got) != len(want)+1 || !strings.Contains(got[len(got)-1], `"t":"turn-end"`) || !strings.Contains(strings.Join(got, "\n"), answer) {
		t.Fatalf("relay stored %d envelopes, replay has %d (+1 turn-end)\ngot:\n%s\nwant:\n%s\nlog:\n%s", len(got), len(want), shortLines(got), shortLines(want), followLogText(state))
	}
	sameEnvelopes(t, got[:len(want)], want)
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := st.Sessions(context.Background())
	st.Close()
	if err != nil || len(sessions) != 1 || !strings.Contains(string(sessions[0].Info), `"mode":"followed"`) {
		t.Fatalf("sessions %+v, %v", sessions, err)
	}

	// Under ccrelay the same hook runs, and leaves the session to it.
	const under = "f0110ede-0000-4000-8000-000000000002"
	cmd := exec.Command(binary, "--claude", bin, "--state", t.TempDir(), "--out", filepath.Join(t.TempDir(), "out.jsonl"), "--", "-p", "hello under ccrelay", "--session-id", under)
	cmd.Dir, cmd.Env = e.Project, e.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ccrelay -p: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(followLogText(state), "session="+under) {
		if time.Now().After(deadline) {
			t.Fatalf("the hook never ran for the session under ccrelay; log:\n%s", followLogText(state))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, l := range strings.Split(followLogText(state), "\n") {
		if strings.Contains(l, "session="+under) && !strings.Contains(l, "a ccrelay runs this Claude") {
			t.Fatalf("the session under ccrelay was followed too: %s", l)
		}
	}

	if out := follow("uninstall"); !strings.Contains(out, "as it was") {
		t.Fatalf("uninstall: %s", out)
	}
	if b, _ := os.ReadFile(settings); !bytes.Equal(b, []byte(before)) {
		t.Fatalf("settings after uninstall:\n%q\nwant, byte for byte:\n%q", b, before)
	}
	if _, err := os.Stat(settings + hooksettings.BackupSuffix); !os.IsNotExist(err) {
		t.Fatalf("backup left after uninstall: %v", err)
	}
}

// waitFollowerGone waits until the follower of session said it sent what
// it had once Claude ended, and then exited (its lock file removed).
func waitFollowerGone(t *testing.T, state, session string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		log := followLogText(state)
		done := false
		for _, l := range strings.Split(log, "\n") {
			done = done || strings.Contains(l, "session="+session) && (strings.Contains(l, "the session is sent") || strings.Contains(l, "not all sent"))
		}
		if _, err := os.Stat(filepath.Join(followLocks(state), session+".lock")); done && os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower of %s did not end; log:\n%s", session, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func followLogText(state string) string {
	b, _ := os.ReadFile(filepath.Join(state, "ccrelay.log"))
	return string(b)
}
