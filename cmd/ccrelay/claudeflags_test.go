package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// splitArgs takes ccrelay's own flags, with their values in either form,
// and leaves everything else to Claude, in order.
func TestSplitArgs(t *testing.T) {
	fs := newRootCmd().Flags()
	for _, tc := range []struct {
		args         []string
		own, claudes []string
	}{
		{[]string{"--resume", "abc"}, nil, []string{"--resume", "abc"}},
		{[]string{"-c"}, nil, []string{"-c"}},
		{[]string{"-p", "explain this"}, nil, []string{"-p", "explain this"}},
		{[]string{"--model", "opus", "--relay", "http://x", "-c"}, []string{"--relay", "http://x"}, []string{"--model", "opus", "-c"}},
		{[]string{"--state=/s", "--model=opus", "--remote", "hi"}, []string{"--state=/s", "--remote"}, []string{"--model=opus", "hi"}},
		{[]string{"--out", "f", "--", "--relay", "x"}, []string{"--out", "f"}, []string{"--relay", "x"}},
		{[]string{"--allow-bypass-from-app", "--permission-mode", "plan"}, []string{"--allow-bypass-from-app"}, []string{"--permission-mode", "plan"}},
	} {
		own, claudes := splitArgs(fs, tc.args)
		if !reflect.DeepEqual(own, tc.own) || !reflect.DeepEqual(claudes, tc.claudes) {
			t.Errorf("splitArgs(%q) = %q, %q; want %q, %q", tc.args, own, claudes, tc.own, tc.claudes)
		}
	}
}

// Claude's own flags reach Claude without --, in their order, next to
// ccrelay's own flags wherever they are.
func TestClaudeFlagsWithoutDashes(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"--resume", id}, []string{"--resume", id}},
		{[]string{"-c"}, []string{"-c"}},
		{[]string{"-p", "explain this"}, []string{"-p", "explain this"}},
		{[]string{"--model", "opus", "--session-id", id}, []string{"--model", "opus", "--session-id", id}},
		{[]string{"--model=opus", "--remote=false", "-c"}, []string{"--model=opus", "-c"}},
		{[]string{"--", "--help"}, []string{"--help"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := newLocalRun(t, recLines(0, 1), nil)
			argLog := filepath.Join(r.state, "args.jsonl")
			cmd := r.command(tc.args...)
			cmd.Env = append(cmd.Env, "FAKE_CLAUDE_ARGLOG="+argLog)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ccrelay %q: %v\n%s", tc.args, err, out)
			}
			b, err := os.ReadFile(argLog)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			var claudes []string
			for _, a := range got {
				if !strings.HasPrefix(a, "--settings=") {
					claudes = append(claudes, a)
				}
			}
			if !reflect.DeepEqual(claudes, tc.want) {
				t.Fatalf("claude got %q, want %q", claudes, tc.want)
			}
		})
	}
}

// --help says where the other flags go.
func TestHelpSaysFlagsGoToClaude(t *testing.T) {
	res := run(t, "--help")
	if res.code != 0 || !strings.Contains(res.stdout, "does not define") || !strings.Contains(res.stdout, "goes to Claude") ||
		!strings.Contains(res.stdout, "ccrelay --resume <id>") {
		t.Fatalf("exit %d, help:\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := run(t, "serv"); res.code == 0 || !strings.Contains(res.stderr, `did you mean "serve"`) {
		t.Fatalf("a mistyped command: exit %d %s", res.code, res.stderr)
	}
}

// A hangup reaches Claude as a hangup, and nothing else follows it while
// Claude cleans up: ccrelay exits with Claude's code for it (129), not with
// SIGTERM's 143.
func TestHangupExitCode(t *testing.T) {
	r := newLocalRun(t, recLines(0, 1), map[string]any{"hang": true})
	cmd := r.command()
	cmd.Env = append(cmd.Env, "FAKE_CLAUDE_HUP_CLEANUP_MS=300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, r.pidfile)
	cmd.Process.Signal(syscall.SIGHUP)
	err := cmd.Wait()
	waitGone(t, pid)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 128+int(syscall.SIGHUP) {
		t.Fatalf("exit %d after SIGHUP, want %d", code, 128+int(syscall.SIGHUP))
	}
}
