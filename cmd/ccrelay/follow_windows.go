package main

import (
	"log/slog"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// detachedAttr starts a follower apart from Claude's console.
func detachedAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP | windows.DETACHED_PROCESS}
}

// processAlive reports whether the process pid still runs.
func processAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return false
	}
	return code == 259 // STILL_ACTIVE
}

// processStart is "" on Windows: a process handle's exit code tells
// whether it runs (pids are used again there too, which is not guarded).
func processStart(int) string { return "" }

// claudeProcess is the process id of the Claude that runs this hook: on
// Windows the hook is spawned directly (exec form, no shell), so its
// parent.
func claudeProcess(*slog.Logger) int { return os.Getppid() }
