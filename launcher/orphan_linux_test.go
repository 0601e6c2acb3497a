package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ccrelay/ccrelay/internal/testutil"
)

// orphanHelperEnv makes the test binary act as a ccrelay with Pdeathsig
// turned off (the situation on macOS), running a fake Claude in local or
// remote mode, until it is killed.
const orphanHelperEnv = "CCRELAY_LAUNCHER_ORPHAN_HELPER"

// orphanGrace is how soon after ccrelay's death its Claude must be gone.
const orphanGrace = 2 * time.Second

func init() {
	if mode := os.Getenv(orphanHelperEnv); mode != "" {
		os.Exit(orphanHelper(mode))
	}
}

// orphanHelper runs Claude as ccrelay does (childAttr, startTree) with no
// parent-death signal, and never returns on its own.
func orphanHelper(mode string) int {
	pdeathsig = false
	fake, home := os.Getenv("ORPHAN_FAKE_CLAUDE"), os.Getenv("HOME")
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_PIDFILE=" + os.Getenv("FAKE_CLAUDE_PIDFILE"),
		"FAKE_CLAUDE_SCRIPT=" + os.Getenv("FAKE_CLAUDE_SCRIPT")}
	switch mode {
	case "local":
		// The terminal (a pty the test holds) is Claude's as it is
		// ccrelay's.
		_, err := RunLocal(context.Background(), LocalOptions{Claude: fake, Dir: home, Env: env,
			Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, HookCommand: []string{fake, "hook"},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		fmt.Fprintln(os.Stderr, "RunLocal returned:", err)
		return 3
	case "remote":
		p, err := startProcess(fake, []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json"}, home, env)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		go io.Copy(io.Discard, p.stdout)
		select {}
	}
	return 2
}

// With no parent-death signal (macOS has none), Claude still ends within
// orphanGrace of a SIGKILLed ccrelay: in local mode because the terminal
// hangs up (ccrelay led its session, as when a terminal runs it directly),
// in remote mode because its stdin, written only by ccrelay, ends.
func TestNoOrphanWithoutPdeathsig(t *testing.T) {
	for _, mode := range []string{"local", "remote"} {
		t.Run(mode, func(t *testing.T) {
			home := t.TempDir()
			pidfile := filepath.Join(home, "claude.pid")
			script := filepath.Join(home, "script.json")
			b, _ := json.Marshal(map[string]any{"hang": true})
			if err := os.WriteFile(script, b, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), orphanHelperEnv+"="+mode, "ORPHAN_FAKE_CLAUDE="+fakeClaude, "HOME="+home,
				"FAKE_CLAUDE_PIDFILE="+pidfile, "FAKE_CLAUDE_SCRIPT="+script)
			var errb strings.Builder
			if mode == "local" {
				ptmx, tty, err := pty.Open()
				if err != nil {
					t.Fatal(err)
				}
				defer ptmx.Close()
				defer tty.Close()
				go io.Copy(io.Discard, ptmx)
				cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
			} else {
				cmd.Stderr = &errb
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := waitPID(t, pidfile, cmd)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			killed := time.Now()
			for testutil.ProcessAlive(pid) && !zombie(pid) {
				if time.Since(killed) > orphanGrace {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("claude (pid %d) outlived ccrelay by %v; helper: %s", pid, orphanGrace, errb.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("claude gone %v after ccrelay was killed", time.Since(killed).Round(time.Millisecond))
		})
	}
}

// waitPID waits for the fake Claude to write its pid.
func waitPID(t *testing.T, path string, helper *exec.Cmd) int {
	t.Helper()
	deadline := time.Now().Add(untilLimit)
	for {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		if time.Now().After(deadline) {
			helper.Process.Kill()
			t.Fatal("fake claude never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and waits to be reaped (by init,
// once its parent is gone).
func zombie(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && strings.Contains(string(st), ") Z ")
}
