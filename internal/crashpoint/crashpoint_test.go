package crashpoint

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// A process started with CCRELAY_CRASH_AT=step@n is killed with SIGKILL
// the nth time it reaches step, not before, and other steps pass.
func TestHitKillsAtTheNthHit(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") != "" {
		for i := 1; i <= 3; i++ {
			Hit("other")
			Hit("step")
			fmt.Println("passed", i)
		}
		return
	}
	for _, tc := range []struct {
		env    string
		passed int // hits of "step" that passed before the kill; 3: no kill
	}{
		{"step", 0}, {"step@2", 1}, {"step@3", 2}, {"nothing", 3}, {"", 3},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHitKillsAtTheNthHit$")
		cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", Env+"="+tc.env)
		out, err := cmd.Output()
		passed := strings.Count(string(out), "passed")
		var ee *exec.ExitError
		sigkilled := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if passed != tc.passed || sigkilled != (tc.passed < 3) {
			t.Errorf("%s=%q: %d hits passed (want %d), err %v", Env, tc.env, passed, tc.passed, err)
		}
	}
}
