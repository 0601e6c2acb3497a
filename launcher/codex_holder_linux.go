package launcher

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// holderOf tells, from /proc, whether a process of root's tree (root and
// its descendants) holds the file at path open, only others do, or none;
// held by Codex's shared app server (inside root's tree or not), it does
// not say.
// A process whose descriptors cannot be read (another user's) is not
// counted: it is not of root's tree, which runs as this user.
func holderOf(path string, root int) rolloutHolder {
	if root <= 0 {
		return holderUnknown
	}
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		return holderUnknown
	}
	if want, err = filepath.Abs(want); err != nil {
		return holderUnknown
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return holderUnknown
	}
	found := holderNone
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if !holds(pid, want) {
			continue
		}
		if sharedServer(pid) {
			// Codex's shared background app server (the TUI's default)
			// writes the threads of every TUI that uses it: it tells
			// nothing of whose thread it is, even as a child of this
			// run's TUI, which starts it when none runs (seen with
			// 0.169.0: its own session, this run's TUI its parent until
			// the TUI exits).
			if found == holderNone {
				found = holderUnknown
			}
			continue
		}
		if inTree(pid, root) {
			return holderOurs
		}
		found = holderOther
	}
	return found
}

// sharedServer reports whether process pid runs `codex app-server …`
// (the shared background server the TUI starts and leaves running: with
// 0.169.0, `<CODEX_HOME>/packages/app-server-daemon/releases/…/bin/codex
// app-server --listen unix:// --analytics-default-enabled --managed-daemon`).
func sharedServer(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(string(b), "\x00"), "app-server")
}

// holds reports whether process pid has the file at path open.
func holds(pid int, path string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if l, err := os.Readlink(dir + "/" + fd.Name()); err == nil && l == path {
			return true
		}
	}
	return false
}

// inTree reports whether pid is root or one of its descendants, following
// parents up (a bounded walk: pids do not loop, but a walk ends anyway).
func inTree(pid, root int) bool {
	for range 4096 {
		if pid == root {
			return true
		}
		if pid <= 1 {
			return false
		}
		pp, ok := parentOf(pid)
		if !ok {
			return false
		}
		pid = pp
	}
	return false
}

// parentOf reads a process's parent from /proc/<pid>/stat (its fourth
// field, after the command name in parentheses, which may hold anything).
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}
