//go:build linux

package main

import (
	"os/exec"
	"testing"
)

// A follower waits for its Claude's process, and only for it: a process
// that took the same pid later (another start time) is not its Claude.
func TestStillRunsKnowsTheProcess(t *testing.T) {
	p := exec.Command("sleep", "600")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Process.Kill()
	pid := p.Process.Pid
	start := processStart(pid)
	if start == "" {
		t.Fatal("no start time for a running process")
	}
	if !stillRuns(pid, start) || !stillRuns(pid, "") {
		t.Fatal("a running process is said to have ended")
	}
	if stillRuns(pid, start+"1") {
		t.Fatal("a process that started at another time is taken for the one waited for")
	}
	p.Process.Kill()
	p.Wait()
	if stillRuns(pid, start) {
		t.Fatal("an ended process is said to run")
	}
}
