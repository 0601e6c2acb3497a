//go:build unix

package main

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// detachedAttr starts a follower in a session of its own: no signal meant
// for Claude's terminal or process group reaches it.
func detachedAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// processAlive reports whether the process pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// processStart is when process pid started, as Linux counts it (field 22
// of /proc/<pid>/stat), so that a pid used again by another process is
// not taken for it; "" where it cannot be read (other systems).
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return ""
	}
	// After the command: state (field 3) … starttime (field 22).
	fields := strings.Fields(s[end+1:])
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// shells are what Claude Code runs a hook's command through; the hook's
// parent is then the shell (unless it exec'd the command), and Claude the
// shell's parent.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true, "busybox": true}

// claudeProcess is the process id of the Claude that runs this hook: the
// parent, or the parent's parent when the parent is the shell the hook's
// command runs in.
func claudeProcess(log *slog.Logger) int {
	pid := os.Getppid()
	name, ppid, err := procParent(pid)
	if err != nil {
		log.Warn("could not tell what runs the hook; following its parent", "pid", pid, "err", err)
		return pid
	}
	if shells[name] && ppid > 1 {
		return ppid
	}
	return pid
}

// procParent is the command name and the parent of process pid.
func procParent(pid int) (name string, ppid int, err error) {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			return "", 0, errors.New("unreadable /proc stat")
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 {
			return "", 0, errors.New("unreadable /proc stat")
		}
		ppid, err := strconv.Atoi(fields[1])
		return s[open+1 : end], ppid, err
	}
	out, err := exec.Command("ps", "-o", "ppid=", "-o", "comm=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return "", 0, err
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		return "", 0, errors.New("ps said nothing of it")
	}
	ppid, err = strconv.Atoi(fields[0])
	return filepath.Base(strings.Join(fields[1:], " ")), ppid, err
}
