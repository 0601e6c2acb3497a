package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ccrelay/ccrelay/claude"
)

// twoProcRecords and twoProcIntervalMS are what each Claude writes in the
// two-process tests: 1,500 records, one every 3 ms.
const (
	twoProcRecords    = 1500
	twoProcIntervalMS = 3
	twoProcRuns       = 10
)

// twoRuns starts two ccrelay processes in one folder with one state folder,
// each with its own Claude session writing twoProcRecords records, waits
// for both, and returns the sessions and their transcripts.
func twoRuns(t *testing.T, r *localRun, args ...string) (sessions, transcripts [2]string) {
	t.Helper()
	var cmds [2]*exec.Cmd
	var outs [2]*bytes.Buffer
	dir, err := claude.ProjectDir(filepath.Join(r.home, ".claude"), r.project)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cmds {
		sessions[i] = claude.NewSessionID()
		transcripts[i] = claude.TranscriptPath(dir, sessions[i])
		cmd := exec.Command(binary, append(append([]string{"--claude", fakeClaude, "--state", r.state}, args...), "--", "--session-id", sessions[i])...)
		cmd.Dir = r.project
		cmd.Env = []string{"HOME=" + r.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + r.script}
		outs[i] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("ccrelay %d: %v\n%s", i, err, outs[i])
		}
		if outs[i].Len() > 0 {
			t.Logf("ccrelay %d said: %s", i, outs[i])
		}
	}
	return sessions, transcripts
}

// replayLines is `ccrelay replay --format jsonl` of a transcript.
func replayLines(t *testing.T, transcript string) []string {
	t.Helper()
	res := run(t, "replay", "--format", "jsonl", "-q", transcript)
	if res.code != 0 {
		t.Fatalf("replay: %s", res.stderr)
	}
	return strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
}

// Two ccrelay --relay processes in one folder with one state folder, both
// relaying 1,500 records at 3 ms intervals: each holds a slot of its own
// (cursor, outbox), so both sessions reach the relay equal to their
// replay, in every one of 10 runs.
func TestTwoProcessesOneFolderToRelay(t *testing.T) {
	data := t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	r := newLocalRun(t, recLines(0, twoProcRecords), map[string]any{"intervalMs": twoProcIntervalMS})
	for run := range twoProcRuns {
		sessions, transcripts := twoRuns(t, r, "--relay", base, "--relay-token", token)
		for i := range sessions {
			want := replayLines(t, transcripts[i])
			if len(want) < twoProcRecords {
				t.Fatalf("run %d: replay has %d envelopes", run, len(want))
			}
			got := storedLines(t, data, sessions[i])
			if len(got) != len(want)+1 {
				log, _ := os.ReadFile(filepath.Join(r.state, "ccrelay.log"))
				t.Fatalf("run %d, session %d: the relay has %d envelopes, replay %d; log:\n%s", run, i, len(got), len(want), tail(string(log), 3000))
			}
			sameLines(t, closedTurn(t, got), want)
		}
	}
	// Slots of runs that ended are taken over and removed: at most the
	// second slot of the last run is left (no run took it over yet).
	left, _ := filepath.Glob(filepath.Join(r.state, "projects", "*", "run-*"))
	if len(left) > 1 {
		t.Fatalf("slots left behind: %v", left)
	}
}

// The same with --out: both processes append to one file, whose lines carry
// their session; each session's lines equal its replay.
func TestTwoProcessesOneFolderToFile(t *testing.T) {
	r := newLocalRun(t, recLines(0, twoProcRecords), map[string]any{"intervalMs": twoProcIntervalMS})
	for run := range twoProcRuns {
		os.Remove(r.out)
		sessions, transcripts := twoRuns(t, r, "--out", r.out)
		bySession := outLines(t, r.out)
		for i := range sessions {
			want := replayLines(t, transcripts[i])
			got := bySession[sessions[i]]
			if len(got) == 0 {
				t.Fatalf("run %d: no line of session %d in the file (sessions in it: %d)", run, i, len(bySession))
			}
			sameLines(t, closedTurn(t, got), want)
		}
	}
}

// outLines reads an --out file: per session, its envelopes as replay
// prints them (without the session key).
func outLines(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var s struct {
			Session string `json:"session"`
		}
		line := sc.Text()
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		prefix := fmt.Sprintf(`{"session":%q,`, s.Session)
		if s.Session == "" || !strings.HasPrefix(line, prefix) {
			t.Fatalf("line without its session first: %.200s", line)
		}
		out[s.Session] = append(out[s.Session], "{"+strings.TrimPrefix(line, prefix))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// closedTurn is got without its last envelope, which must be the turn-end
// ccrelay adds when Claude exits (replay leaves the last turn open).
func closedTurn(t *testing.T, got []string) []string {
	t.Helper()
	if len(got) == 0 || !strings.Contains(got[len(got)-1], `"ev":{"t":"turn-end","status":"completed"}`) {
		t.Fatalf("the session does not end with the turn-end of Claude's exit: %d envelopes", len(got))
	}
	return got[:len(got)-1]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
