package orphans

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// running lists the processes whose command line holds arg.
func running(arg string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		st, _ := os.ReadFile(filepath.Join(filepath.Dir(d), "stat"))
		if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && st[i+2] == 'Z' {
			continue // exited, not reaped yet
		}
		if err == nil && bytes.Contains(b, []byte(arg)) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// A child that starts commands in sessions of their own (as Claude Code
// runs a Bash command) and dies: once Adopt was called, End kills and reaps
// what it left (each command, its process group and what is below it);
// nothing of it runs on.
func TestEndKillsWhatADeadChildLeft(t *testing.T) {
	marker := strconv.Itoa(600+os.Getpid()%100) + ".4242"
	t.Cleanup(func() {
		for _, p := range running(marker) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	if err := Adopt(); err != nil {
		t.Fatal(err)
	}
	// A shell in a session of its own running two commands, one of which
	// starts a group of its own; then the child that started it dies.
	child := exec.Command("sh", "-c", `setsid sh -c "sleep `+marker+` & setsid sleep `+marker+` & wait" >/dev/null 2>&1 & exit 0`)
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(running(marker)) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the commands never ran: %v", running(marker))
		}
	}
	n, err := End(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if left := running(marker); len(left) > 0 || n < 1 {
		t.Fatalf("End ended %d processes; still running: %v", n, left)
	}
	if n, err := End(time.Second); n != 0 || err != nil {
		t.Fatalf("a second End: %d, %v", n, err)
	}
}
