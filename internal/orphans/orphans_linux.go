// Package orphans ends what a child leaves running when it dies: the
// processes it started in sessions of their own (Claude Code runs each Bash
// command so), which its death hands to init, where nothing ends them.
package orphans

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Adopt makes this process the reaper of the orphans of its descendants
// from now on (Linux's PR_SET_CHILD_SUBREAPER): a process whose parent dies
// becomes this process's child instead of init's, for End to end. Call it
// just before the children are stopped: orphans made earlier (a server a
// user started with nohup) stay init's.
func Adopt() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become the reaper of orphans: %w", err)
	}
	return nil
}

// End kills this process's children, with their process groups and
// everything below them, and reaps them, round after round (a process
// killed hands its own children to this one) until none is left or
// timeout passes. It returns how many it ended. Call it only when every
// child this process started itself was waited for: every child left is
// an orphan it adopted.
func End(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	ended := 0
	for {
		kids, err := children(os.Getpid())
		if err != nil {
			return ended, err
		}
		if len(kids) == 0 {
			return ended, nil
		}
		if time.Now().After(deadline) {
			return ended, fmt.Errorf("%d adopted processes still there after %v", len(kids), timeout)
		}
		for _, pid := range kids {
			killTree(pid)
		}
		reaped := 0
		for _, pid := range kids {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			switch {
			case err == nil && got == pid:
				reaped++
			case err != nil && !errors.Is(err, syscall.ECHILD):
				return ended, fmt.Errorf("reap %d: %w", pid, err)
			}
		}
		ended += reaped
		if reaped == 0 {
			time.Sleep(5 * time.Millisecond) // killed, not dead yet
		}
	}
}

// killTree SIGKILLs pid, its process group if it leads one, and its
// descendants (read first: they are stopped before they can be handed on).
func killTree(pid int) {
	kids, _ := children(pid)
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, k := range kids {
		killTree(k)
	}
}

// children lists pid's children, of every thread (/proc/PID/task/*/children).
func children(pid int) ([]int, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		for _, f := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(f); err == nil {
				out = append(out, k)
			}
		}
	}
	return out, nil
}
