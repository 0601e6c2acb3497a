package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/protocol"
)

// Every crash point of a prompt's way from the app to Claude and back (the
// relay's command states, the CLI's command ledger) and of remote mode's
// way from Claude to the outbox (the envelopes it maps from stream-json):
// a remote session (ccrelay --remote) gets a prompt from the app with the
// CLI or the relay killed at the step; ccrelay runs again for one more prompt. The relay ends with
// replay of the transcript, each call ended once, at most one turn open at
// a time, and every prompt's status final and true: done for a prompt
// Claude answered, rejected for one it never got.
func TestCrashPointsCommandsAndRemote(t *testing.T) {
	buildFakeClaude(t)
	for _, tc := range []struct {
		step  string
		relay bool // the relay is killed at the step, not the CLI
		// tries is how many app turns the first run gets to meet the step
		// (0: one): the scanner meets a held record only when it reads the
		// transcript before remote mode appended that record's copy.
		tries int
	}{
		{crashpoint.LedgerBegun, false, 0},
		{crashpoint.LedgerFinished, false, 0},
		{crashpoint.RelayCommandAdded, true, 0},
		{crashpoint.RelayCommandMoved, true, 0},        // delivered
		{crashpoint.RelayCommandMoved + "@2", true, 0}, // done
		{crashpoint.RemoteMapped, false, 0},
		{crashpoint.RemoteHeld, false, 3},
	} {
		t.Run(tc.step, func(t *testing.T) {
			const session = "90909090-2222-4333-8444-555555555555"
			relayPoint, cliPoint := "", tc.step
			if tc.relay {
				relayPoint, cliPoint = tc.step, ""
			}
			rl := startCrashRelay(t, relayPoint)
			s := newCrashSession(t, rl, session)
			cmd, stderr := s.start(cliPoint, "--remote", "--session", session)
			exited := waitChan(cmd)
			prompts := []string{"one"}
			s.prompt("one")
			ended := s.until("the first app turn", cmd, exited, func() bool { return s.turnEnds() >= 1 })
			for i := 2; !ended && i <= tc.tries; i++ {
				before := s.turnEnds()
				prompts = append(prompts, fmt.Sprintf("one, try %d", i))
				s.prompt(prompts[len(prompts)-1])
				ended = s.until("another app turn", cmd, exited, func() bool { return s.turnEnds() > before })
			}
			crashed := s.stop(cmd, exited, stderr)
			if crashed == tc.relay || (tc.relay && rl.crashes == 0) {
				t.Fatalf("step %s was never reached (CLI killed %v, relay killed %d times)\n%s", tc.step, crashed, rl.crashes, stderr)
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
			got := storedLines(t, rl.data, session)
			envs := make([]protocol.Envelope, len(got))
			for i, l := range got {
				if err := json.Unmarshal([]byte(l), &envs[i]); err != nil {
					t.Fatal(err)
				}
			}
			envtest.CheckInvariants(t, envs)
			checkPromptStatuses(t, s, envs, append(prompts, "two")...)
			if want := "done"; statusOf(t, s, "two") != want {
				t.Errorf("the prompt of the run without a crash: %s, want %s", s.told, want)
			}
			t.Logf("%d envelopes; crashed: CLI %v, relay %d times; the first prompt: %s", len(got), crashed, rl.crashes, statusOf(t, s, "one"))
		})
	}
}

// checkPromptStatuses asks the relay where each prompt stands (sending it
// again: the relay answers a command it has with its status) and checks
// that it is final and true: done if the session holds the prompt (Claude
// took it), rejected if not.
func checkPromptStatuses(t *testing.T, s *crashSession, envs []protocol.Envelope, texts ...string) {
	t.Helper()
	for _, text := range texts {
		taken := 0
		for _, e := range envs {
			if e.Role == protocol.RoleUser && e.Ev.T == protocol.KindText && e.Ev.Text == text {
				taken++
			}
		}
		if taken > 1 {
			t.Errorf("prompt %q is in the session %d times", text, taken)
		}
		switch st := statusOf(t, s, text); {
		case st == protocol.StatusDone && taken == 1, st == protocol.StatusRejected && taken == 0:
		default:
			t.Errorf("prompt %q: the relay says %q, and the session holds it %d times", text, s.told, taken)
		}
	}
}

// statusOf is the status the relay holds for the app's prompt text.
func statusOf(t *testing.T, s *crashSession, text string) string {
	t.Helper()
	s.prompt(text)
	st, _, _ := strings.Cut(s.told, " ")
	return st
}
