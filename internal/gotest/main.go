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
	"sync"
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
	os.Exit(run("", os.Args[1:], os.Stdout, os.Stderr, os.Getenv("CI") == "true", Split))
}

// run runs go test in dir (the current folder if empty) and returns the exit
// code. The packages split names (import path: parts) run in that many go
// test processes at once, each with a share of the package's tests, beside
// the go test of the other packages.
func run(dir string, args []string, stdout, stderr io.Writer, ci bool, split map[string]int) int {
	args = withTimeout(args)
	s := newSummary(stdout)
	if _, ok := stderr.(*os.File); !ok {
		stderr = &lockedWriter{w: stderr} // written by every go test at once
	}
	g := &group{dir: dir, stderr: stderr, s: s}
	// go test and the test programs run in process groups of their own; an
	// interrupt or a SIGTERM to gotest goes to all of them as an interrupt,
	// and gotest reads on until every go test stops, then sums up what ran.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan struct{})
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case <-sig:
				g.interrupt()
			case <-done:
				return
			}
		}
	}()
	defer func() { close(done); <-forwarded }()

	flags, patterns, ok := splitArgs(args)
	var apart []string // packages to split
	if ok && len(split) > 0 && len(patterns) > 0 {
		if pkgs, err := goList(dir, flags, patterns); err != nil {
			fmt.Fprintln(stderr, "gotest: the packages are not split:", err)
		} else {
			var rest []string
			for _, p := range pkgs {
				if split[p] > 1 {
					apart = append(apart, p)
				} else {
					rest = append(rest, p)
				}
			}
			if len(apart) > 0 {
				args = nil
				if len(rest) > 0 {
					args = append(append([]string{}, flags...), rest...)
				}
			}
		}
	}
	if args != nil {
		g.start("", args)
	}
	for _, p := range apart {
		names, err := listTests(dir, flags, p)
		if err != nil || len(names) < 2 {
			if err != nil {
				fmt.Fprintln(stderr, "gotest: not split:", err)
			}
			g.start("", append(append([]string{}, flags...), p))
			continue
		}
		runs := deal(names, split[p])
		for i, r := range runs {
			g.start(fmt.Sprintf(" (part %d of %d)", i+1, len(runs)), append(append([]string{}, flags...), "-run", r, p))
		}
	}
	return s.finish(g.wait(), ci)
}

// lockedWriter writes to w one write at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// group is the go test processes of one run, feeding one summary.
type group struct {
	dir    string
	stderr io.Writer
	s      *summary

	mu          sync.Mutex // the summary, cmds, code, interrupted
	cmds        []*exec.Cmd
	readers     sync.WaitGroup
	code        int  // the first non-zero exit code of a go test
	interrupted bool // no go test starts after an interrupt
}

// start starts go test -json with args; part, when not empty, tells its
// packages apart from the same packages in other go tests.
func (g *group) start(part string, args []string) {
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Dir, cmd.Stderr = g.dir, g.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		g.fail("gotest:", err)
		return
	}
	ownGroup(cmd)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.interrupted {
		pipe.Close()
		if g.code == 0 {
			g.code = 2
		}
		return
	}
	if err := cmd.Start(); err != nil {
		g.code = 2
		fmt.Fprintln(g.stderr, "gotest: start go test:", err)
		return
	}
	g.cmds = append(g.cmds, cmd)
	g.readers.Add(1)
	go func() { // owned by the group: wait waits for it
		defer g.readers.Done()
		rerr := read(pipe, func(line []byte) {
			g.mu.Lock()
			g.s.lineOf(part, line)
			g.mu.Unlock()
		})
		werr := cmd.Wait()
		if rerr != nil {
			g.fail("gotest: read go test output:", rerr)
		}
		var ee *exec.ExitError
		if errors.As(werr, &ee) && ee.ExitCode() > 0 {
			g.setCode(ee.ExitCode())
		} else if werr != nil { // could not wait, or stopped by a signal
			g.fail("gotest: go test:", werr)
		}
	}()
}

func (g *group) fail(what string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fmt.Fprintln(g.stderr, what, err)
	if g.code == 0 {
		g.code = 2
	}
}

func (g *group) setCode(code int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.code == 0 {
		g.code = code
	}
}

// interrupt interrupts every go test started.
func (g *group) interrupt() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.interrupted = true
	for _, cmd := range g.cmds {
		interruptGroup(cmd)
	}
}

// wait waits until every go test ended and its output was read, and returns
// the first non-zero exit code of one (0 when all passed).
func (g *group) wait() int {
	g.readers.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.code
}

// read feeds every line of r to line.
func read(r io.Reader, line func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		l, err := br.ReadBytes('\n')
		if len(l) > 0 {
			line(l)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
