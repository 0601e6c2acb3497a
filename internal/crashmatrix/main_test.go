//go:build linux

package crashmatrix

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the ccrelay built for these tests; initstop the helper that
// stops Claude at its init line (see initstop/main.go).
var binary, initstop string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "crashmatrix-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	binary, initstop = filepath.Join(dir, "ccrelay"), filepath.Join(dir, "initstop")
	for out, pkg := range map[string]string{binary: "../../cmd/ccrelay", initstop: "./initstop"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, b)
			return 2
		}
	}
	return m.Run()
}
