package main

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/testutil"
)

// waitRun's timeout reads what the run wrote on stderr while the run's
// output is still copied into it (cmd.Wait has not returned): a run that
// writes without end, given up on. With stderr a strings.Builder, as
// before, the race detector fails this test (go test -race).
func TestWaitRunTimeoutWhileWriting(t *testing.T) {
	stderr := &testutil.SyncBuffer{}
	cmd := exec.Command("sh", "-c", "while :; do echo still running >&2; done")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Time out once the run has written (or after a minute: the error
	// then lacks its output and the test fails).
	timeout := make(chan time.Time)
	var once sync.Once
	giveUp := time.Now().Add(time.Minute)
	revive := func() {
		if strings.Contains(stderr.String(), "still running") || time.Now().After(giveUp) {
			once.Do(func() { close(timeout) })
		}
	}
	crashed, err := waitRun(cmd, revive, timeout, stderr)
	if crashed || err == nil {
		t.Fatalf("waitRun: crashed %v, err %v; want the timeout's error", crashed, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "ccrelay did not end") || !strings.Contains(msg, "still running") {
		t.Fatalf("the timeout's error lacks the run's output: %.200q", msg)
	}
}
