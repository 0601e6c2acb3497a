//go:build unix

package launcher

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
)

// sttyA is `stty -a` of the terminal tty.
func sttyA(t *testing.T, tty *os.File) string {
	t.Helper()
	cmd := exec.Command("stty", "-a")
	cmd.Stdin = tty
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("stty: %v", err)
	}
	return string(out)
}

// Claude killed by SIGKILL under a pty, after it put the terminal in raw
// mode: RunLocal returns 137, the terminal's settings (stty -a) are what
// they were before Claude started, and one line names the signal.
func TestRunLocalRestoresTerminalAfterKill(t *testing.T) {
	_, tty, scr := newTerminal(t, 120)
	pidfile := filepath.Join(t.TempDir(), "pid")
	r := newFakeRun(t, map[string]any{"lines": []string{}, "hang": true}, "FAKE_CLAUDE_RAW=1", "FAKE_CLAUDE_PIDFILE="+pidfile)
	before := sttyA(t, tty)
	o := r.options(nil)
	o.Stdin, o.Stdout, o.Stderr = tty, tty, tty
	done := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		code, err := RunLocal(ctx, o)
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	// Wait until Claude runs and has made the terminal raw.
	deadline := time.Now().Add(untilLimit)
	for {
		b, _ := os.ReadFile(pidfile)
		if len(b) > 0 && sttyA(t, tty) != before {
			pid, _ := strconv.Atoi(string(b))
			syscall.Kill(pid, syscall.SIGKILL)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("claude never made the terminal raw")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(untilLimit):
		t.Fatal("RunLocal did not return after Claude died")
	}
	if code != 137 {
		t.Fatalf("exit code %d, want 137", code)
	}
	if after := sttyA(t, tty); after != before {
		t.Fatalf("terminal not restored:\nbefore %s\nafter  %s", before, after)
	}
	deadline = time.Now().Add(untilLimit)
	for !strings.Contains(scr.text(), "Claude was killed by SIGKILL") {
		if time.Now().After(deadline) {
			t.Fatalf("no line about the signal; screen %q", scr.text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
