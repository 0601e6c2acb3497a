//go:build unix

package launcher

import (
	"os"
	"os/exec"
	"syscall"
)

// claudeTree is a started Claude. On Unix it is the process alone: what
// Claude starts is its own business, and Claude ends with ccrelay:
//   - on Linux the kernel kills it when ccrelay dies (Pdeathsig,
//     proc_linux.go);
//   - elsewhere (macOS), and on Linux as well, ccrelay's death takes away
//     what Claude runs on. In remote mode Claude's stdin is a pipe written
//     only by ccrelay: the kernel closes it with ccrelay, and Claude, whose
//     input has ended, exits (as when ccrelay stops it: process.stop). In
//     local mode Claude shares ccrelay's terminal: when ccrelay led the
//     terminal's session (a terminal window that runs it directly), the
//     terminal hangs up with it and Claude gets SIGHUP. Under a shell, the
//     shell takes the terminal back and Claude, left in a background group
//     whose parent is gone, gets EIO from every read of the terminal; that
//     Claude Code exits then is its own doing, not tested here.
//
// TestNoOrphanWithoutPdeathsig checks both with Pdeathsig turned off.
type claudeTree struct{ cmd *exec.Cmd }

// startTree starts cmd (with childAttr set).
func startTree(cmd *exec.Cmd) (*claudeTree, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &claudeTree{cmd: cmd}, nil
}

// terminate asks Claude to stop (SIGTERM).
func (t *claudeTree) terminate() error { return t.cmd.Process.Signal(syscall.SIGTERM) }

// kill stops Claude at once (SIGKILL).
func (t *claudeTree) kill() error { return t.cmd.Process.Kill() }

// release lets go of the tree once Claude was waited for.
func (t *claudeTree) release() {}

// localSignals are the signals ccrelay catches while local Claude runs,
// and hands on to it (forward).
var localSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH}

// forward hands a signal sent to ccrelay on to Claude: Claude decides what
// it means (Ctrl-C twice, etc.).
func (t *claudeTree) forward(sig os.Signal) { _ = t.cmd.Process.Signal(sig) }
