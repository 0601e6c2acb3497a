// Command gotest runs the tests like go test, and says at the end what did
// not run.
//
//	go run ./internal/gotest -race ./...
//
// Its arguments go to `go test -json`. It prints what go test prints without
// -v: a line per package, and the whole output of every test that failed.
// Then it lists the skipped tests with their reasons and the failed ones, and
// ends with a line of its own, "N passed, N failed, N skipped". It exits
// non-zero when a test or a build failed, when go test did, and, under
// CI=true, when any test was skipped: CI installs everything the tests need,
// so a skip there is a test that did not run.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// PackageTimeout bounds each test binary, unless -timeout says otherwise:
// go test's own default (10 minutes) is close to what the browser and real
// Claude Code tests of cmd/ccrelay take together on a 2-core machine.
const PackageTimeout = "30m"

// withTimeout adds -timeout=PackageTimeout to go test's arguments unless
// they set one.
func withTimeout(args []string) []string {
	for _, a := range args {
		if a == "-timeout" || a == "--timeout" || strings.HasPrefix(a, "-timeout=") || strings.HasPrefix(a, "--timeout=") {
			return args
		}
	}
	return append([]string{"-timeout=" + PackageTimeout}, args...)
}

func main() {
	os.Exit(run("", os.Args[1:], os.Stdout, os.Stderr, os.Getenv("CI") == "true"))
}

// run runs go test in dir (the current folder if empty) and returns the exit
// code.
func run(dir string, args []string, stdout, stderr io.Writer, ci bool) int {
	cmd := exec.Command("go", append([]string{"test", "-json"}, withTimeout(args)...)...)
	cmd.Dir, cmd.Stderr = dir, stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "gotest:", err)
		return 2
	}
	// go test and the test programs run in a process group of their own; an
	// interrupt or a SIGTERM to gotest goes to all of them as an interrupt,
	// and gotest reads on until go test stops, then sums up what ran.
	ownGroup(cmd)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "gotest: start go test:", err)
		return 2
	}
	done := make(chan struct{})
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case <-sig:
				interruptGroup(cmd)
			case <-done:
				return
			}
		}
	}()
	defer func() { close(done); <-forwarded }()
	s := newSummary(stdout)
	rerr := s.read(pipe)
	werr := cmd.Wait()
	if rerr != nil {
		fmt.Fprintln(stderr, "gotest: read go test output:", rerr)
	}
	goCode := 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) && ee.ExitCode() > 0 {
		goCode = ee.ExitCode()
	} else if werr != nil { // could not wait, or stopped by a signal
		fmt.Fprintln(stderr, "gotest: go test:", werr)
		goCode = 2
	}
	return s.finish(goCode, ci)
}

// read feeds every line of r to the summary.
func (s *summary) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.line(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
