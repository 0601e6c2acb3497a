package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The state folder's ccrelay.log, which local mode, the follow hook and
// the followers write, is bounded: at MaxStateLogBytes it becomes
// ccrelay.log.1 and a new one starts (it grew without end).
func TestStateLogTurnsOver(t *testing.T) {
	state := t.TempDir()
	path := filepath.Join(state, "ccrelay.log")
	old := bytes.Repeat([]byte("an older line of the log\n"), MaxStateLogBytes/25+1)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "follow", "hook", "--state", state)
	cmd.Stdin = strings.NewReader("{}")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, _ := cmd.CombinedOutput() // it fails: the hook reported no session
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) >= MaxStateLogBytes || !bytes.Contains(cur, []byte("no session id")) {
		t.Fatalf("ccrelay.log holds %d bytes (limit %d), its end %q; the hook said %s", len(cur), MaxStateLogBytes, cur[max(0, len(cur)-120):], out)
	}
	if got, _ := os.ReadFile(path + ".1"); !bytes.Equal(got, old) {
		t.Fatalf("ccrelay.log.1 holds %d bytes, want the %d of the log before", len(got), len(old))
	}
}

// A ccrelay started with StderrLogEnv (launchd's services) bounds that
// file as it starts: launchd appends to it at every start and never cuts
// it.
func TestStderrLogTrimmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ccrelay-daemon.log")
	old := bytes.Repeat([]byte("ccrelay: a start that failed\n"), MaxStderrLogBytes/29+1)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "version")
	cmd.Env = append(os.Environ(), StderrLogEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("the log after the start: %v %v", fi, err)
	}
	if got, _ := os.ReadFile(path + ".1"); !bytes.Equal(got, old[len(old)-MaxStderrLogBytes:]) {
		t.Fatalf("the older file holds %d bytes, want the last %d", len(got), MaxStderrLogBytes)
	}
}

// launchd's services bound the file launchd writes their stderr to: both
// are started with StderrLogEnv naming it, and the relay, which logs every
// connection, writes its log there itself with --log-file (turned over at
// --log-file-max), unless its command line has one.
func TestLaunchdLogsBounded(t *testing.T) {
	for _, tc := range []struct {
		id      serviceID
		args    []string
		logFile string // the --log-file the plist should give, or ""
	}{
		{relayService, []string{"/usr/bin/ccrelay", "serve", "--data", "/Users/me/data"}, "/Users/me/Library/Logs/ccrelay-relay.log"},
		{relayService, []string{"/usr/bin/ccrelay", "serve", "--log-file", "/var/log/mine.log"}, ""},
		{daemonService, []string{"/usr/bin/ccrelay", "daemon"}, ""},
	} {
		svc, err := serviceFor(serviceEnv{ID: tc.id, GOOS: "darwin", Home: "/Users/me", UID: 501, Args: tc.args, Path: "/usr/bin"})
		if err != nil {
			t.Fatal(err)
		}
		logPath := "/Users/me/Library/Logs/ccrelay-" + tc.id.file + ".log"
		if !strings.Contains(svc.Content, "<key>"+StderrLogEnv+"</key>\n\t\t<string>"+logPath+"</string>") ||
			!strings.Contains(svc.Content, "<key>StandardErrorPath</key>\n\t<string>"+logPath+"</string>") ||
			!strings.Contains(svc.Content, "<key>PATH</key>\n\t\t<string>/usr/bin</string>") {
			t.Errorf("%s: the plist does not bound %s:\n%s", tc.id.file, logPath, svc.Content)
		}
		if n := strings.Count(svc.Content, "<string>--log-file</string>"); tc.logFile != "" && !strings.Contains(svc.Content, "<string>--log-file</string>\n\t\t<string>"+tc.logFile+"</string>") || n > 1 || (tc.logFile == "" && tc.id == daemonService && n != 0) {
			t.Errorf("%s %q: --log-file %d times, want %q:\n%s", tc.id.file, tc.args, n, tc.logFile, svc.Content)
		}
	}
}

// ccrelay codex writes to the same state log as local mode, through the
// same bounded file: a log past MaxStateLogBytes turns over.
func TestCodexStateLogTurnsOver(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake codex is a shell script")
	}
	state := t.TempDir()
	path := filepath.Join(state, "ccrelay.log")
	old := bytes.Repeat([]byte("an older line of the log\n"), MaxStateLogBytes/25+1)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	// A "codex" that says no version and exits at once: ccrelay logs that
	// it could not tell Codex's version.
	fake := filepath.Join(t.TempDir(), "codex")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	cmd := exec.Command(binary, "codex", "--codex", fake, "--state", state, "--out", filepath.Join(work, "out.jsonl"))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "CODEX_HOME="+t.TempDir())
	out, _ := cmd.CombinedOutput()
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) == 0 || len(cur) >= MaxStateLogBytes {
		t.Fatalf("ccrelay.log holds %d bytes (limit %d); ccrelay codex said %s", len(cur), MaxStateLogBytes, out)
	}
	if got, _ := os.ReadFile(path + ".1"); !bytes.Equal(got, old) {
		t.Fatalf("ccrelay.log.1 holds %d bytes, want the %d of the log before", len(got), len(old))
	}
}
