package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// childAttr starts Claude suspended, so that startTree puts it in its Job
// Object before it runs and can start anything. Claude stays on ccrelay's
// console and in its process group: the console is Claude's, and Ctrl-C
// reaches it directly.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED}
}

// claudeTree is a started Claude and everything it starts, held in a Job
// Object that kills them all when it is closed: by release, or by Windows
// when ccrelay dies, however it dies (the job's handle is ccrelay's alone,
// never inherited).
type claudeTree struct {
	cmd *exec.Cmd
	mu  sync.Mutex     // kill and release may race (a stop while Claude exits)
	job windows.Handle // 0 once released
}

// startTree starts cmd (made suspended by childAttr), puts it in a new Job
// Object, then lets it run. On failure nothing is left running.
func startTree(cmd *exec.Cmd) (*claudeTree, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("set up job object: %w", err)
	}
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return nil, err
	}
	t := &claudeTree{cmd: cmd, job: job}
	if err := t.adopt(uint32(cmd.Process.Pid)); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		windows.CloseHandle(job)
		return nil, err
	}
	return t, nil
}

// adopt puts the suspended process pid in the job and resumes its threads.
func (t *claudeTree) adopt(pid uint32) error {
	p, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		return fmt.Errorf("open claude's process: %w", err)
	}
	defer windows.CloseHandle(p)
	if err := windows.AssignProcessToJobObject(t.job, p); err != nil {
		return fmt.Errorf("put claude in its job object: %w", err)
	}
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("list claude's threads: %w", err)
	}
	defer windows.CloseHandle(snap)
	resumed := 0
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, oerr := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if oerr != nil {
			return fmt.Errorf("resume claude: %w", oerr)
		}
		_, rerr := windows.ResumeThread(th)
		windows.CloseHandle(th)
		if rerr != nil {
			return fmt.Errorf("resume claude: %w", rerr)
		}
		resumed++
	}
	if resumed == 0 {
		return errors.New("resume claude: no thread found")
	}
	return nil
}

// terminate stops Claude and everything it started. Windows has no
// SIGTERM to send to a program that shares ccrelay's console (a console
// control event would reach ccrelay and every other program on it), so
// this ends the job at once; Claude's transcript is written as it goes.
func (t *claudeTree) terminate() error { return t.kill() }

// kill ends every process in the job.
func (t *claudeTree) kill() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job == 0 {
		return nil // released: Claude is gone, and its tree with the job
	}
	return windows.TerminateJobObject(t.job, 1)
}

// release closes the job once Claude was waited for: whatever Claude left
// running is ended with it.
func (t *claudeTree) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job != 0 {
		windows.CloseHandle(t.job)
		t.job = 0
	}
}

// localSignals are the console events ccrelay catches while local Claude
// runs: Ctrl-C and Ctrl-Break (os.Interrupt), closing the console, logoff
// and shutdown (SIGTERM). Catching them is what keeps ccrelay alive: the
// console delivers each to every program on it, Claude included, and
// Claude decides what it means.
var localSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// forward does nothing on Windows: Claude got the same console event.
func (t *claudeTree) forward(os.Signal) {}
