package testutil

import "golang.org/x/sys/windows"

// stillActive is the exit code Windows reports for a running process.
const stillActive = 259

// ProcessAlive reports whether a process with this pid is still running.
func ProcessAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	var code uint32
	return windows.GetExitCodeProcess(h, &code) == nil && code == stillActive
}
