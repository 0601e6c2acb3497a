package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (test2json's TestEvent, plus the
// build events' ImportPath).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
	ImportPath  string
}

// result is a test that was skipped or failed.
type result struct {
	Package, Test string
	Reason        string // skips: the test's own message
}

func (r result) String() string {
	name := r.Package
	if r.Test != "" {
		name += " " + r.Test
	}
	if r.Reason != "" {
		name += ": " + r.Reason
	}
	return name
}

type testKey struct{ pkg, test string }

// summary follows a `go test -json` stream: it prints what go test prints
// without -v as packages finish, and counts the tests.
type summary struct {
	out    io.Writer
	output map[testKey]*strings.Builder // running tests, and packages (test "")
	build  map[string]*strings.Builder  // build output by ImportPath
	failed map[string]bool              // packages with a failed test

	passed  int
	skipped []result
	fails   []result
}

func newSummary(out io.Writer) *summary {
	return &summary{
		out:    out,
		output: map[testKey]*strings.Builder{},
		build:  map[string]*strings.Builder{},
		failed: map[string]bool{},
	}
}

func (s *summary) buf(k testKey) *strings.Builder {
	b := s.output[k]
	if b == nil {
		b = &strings.Builder{}
		s.output[k] = b
	}
	return b
}

// read feeds every line of r to the summary.
func (s *summary) read(r io.Reader) error { return read(r, s.line) }

// line takes one line of go test's output.
func (s *summary) line(line []byte) { s.lineOf("", line) }

// lineOf takes one line of the output of a go test that runs part of its
// packages' tests (part says which, "" for all): the packages are followed
// apart from the same packages in other go tests, and named without part.
func (s *summary) lineOf(part string, line []byte) {
	var e event
	if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
		s.out.Write(line) // not an event: pass it through
		return
	}
	if part != "" {
		if e.Package != "" {
			e.Package += part
		}
		if e.ImportPath != "" {
			e.ImportPath += part
		}
	}
	switch e.Action {
	case "build-output":
		b := s.build[e.ImportPath]
		if b == nil {
			b = &strings.Builder{}
			s.build[e.ImportPath] = b
		}
		b.WriteString(e.Output)
		return
	case "build-fail":
		if b := s.build[e.ImportPath]; b != nil {
			io.WriteString(s.out, b.String())
			delete(s.build, e.ImportPath)
		}
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "start", "run":
		s.buf(k)
	case "output":
		s.buf(k).WriteString(e.Output)
	case "pass":
		if e.Test == "" {
			s.endPackage(e, false)
			return
		}
		s.passed++
		delete(s.output, k)
	case "skip":
		if e.Test == "" { // a package without tests
			s.endPackage(e, false)
			return
		}
		s.skipped = append(s.skipped, result{wholePackage(e.Package), e.Test, skipReason(s.buf(k).String())})
		delete(s.output, k)
	case "fail":
		if e.Test == "" {
			s.endPackage(e, true)
			return
		}
		s.failTest(k)
	}
}

// failTest counts a failed test and prints its output.
func (s *summary) failTest(k testKey) {
	s.fails = append(s.fails, result{Package: wholePackage(k.pkg), Test: k.test})
	s.failed[k.pkg] = true
	io.WriteString(s.out, withoutFraming(s.buf(k).String()))
	delete(s.output, k)
}

// endPackage prints a package's line. A failed package also shows its own
// output, and its tests that never finished (a timeout, a crash) count as
// failed; a package that failed with no failed test (a build failure, a
// TestMain that exits) counts as one failure.
func (s *summary) endPackage(e event, fail bool) {
	k := testKey{e.Package, ""}
	out := s.buf(k).String()
	delete(s.output, k)
	if !fail {
		for _, l := range lines(out) {
			if strings.HasPrefix(l, "ok  ") || strings.HasPrefix(l, "?   ") || isBenchLine(l) {
				io.WriteString(s.out, l)
			}
		}
		return
	}
	var running []string
	for tk := range s.output {
		if tk.pkg == e.Package {
			running = append(running, tk.test)
		}
	}
	sort.Strings(running)
	for _, name := range running {
		s.failTest(testKey{e.Package, name})
	}
	if !s.failed[e.Package] {
		r := result{Package: wholePackage(e.Package)}
		if e.FailedBuild != "" {
			r.Reason = "build failed"
		}
		s.fails = append(s.fails, r)
		s.failed[e.Package] = true
	}
	for _, l := range lines(out) {
		if l != "FAIL\n" && l != "PASS\n" {
			io.WriteString(s.out, l)
		}
	}
}

// wholePackage is pkg without the part of its tests one go test ran.
func wholePackage(pkg string) string {
	name, _, _ := strings.Cut(pkg, " (part ")
	return name
}

// finish prints what was skipped and what failed, then the closing line, and
// returns the exit code: goCode is go test's own.
func (s *summary) finish(goCode int, ci bool) int {
	for ip, b := range s.build { // build output not followed by a failure
		io.WriteString(s.out, b.String())
		delete(s.build, ip)
	}
	if len(s.skipped) > 0 {
		fmt.Fprintf(s.out, "\nskipped:\n")
		for _, r := range s.skipped {
			fmt.Fprintf(s.out, "  %s\n", r)
		}
	}
	if len(s.fails) > 0 {
		fmt.Fprintf(s.out, "\nfailed:\n")
		for _, r := range s.fails {
			fmt.Fprintf(s.out, "  %s\n", r)
		}
	}
	code := 0
	switch {
	case len(s.fails) > 0:
		code = 1
	case goCode != 0:
		fmt.Fprintf(s.out, "\ngo test exited with status %d\n", goCode)
		code = goCode
	case ci && len(s.skipped) > 0:
		fmt.Fprintf(s.out, "\nCI=true: every test must run here, and %d did not\n", len(s.skipped))
		code = 1
	}
	fmt.Fprintf(s.out, "%d passed, %d failed, %d skipped\n", s.passed, len(s.fails), len(s.skipped))
	return code
}

// skipReason is what a skipped test said: its output without the framing
// lines, on one line.
func skipReason(out string) string {
	var parts []string
	for _, l := range lines(withoutFraming(out)) {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "--- SKIP: ") {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " / ")
}

// withoutFraming drops the lines go test -v adds around a test's output
// ("=== RUN", "=== PAUSE", "=== CONT", "=== NAME"), which go test without
// -v does not print.
func withoutFraming(out string) string {
	var b strings.Builder
	for _, l := range lines(out) {
		if strings.HasPrefix(l, "=== ") {
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}

func isBenchLine(l string) bool {
	for _, p := range []string{"Benchmark", "goos: ", "goarch: ", "pkg: ", "cpu: "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// lines splits s after each newline; a last line without one gets one.
func lines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s+"\n")
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}
