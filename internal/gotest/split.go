package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// Split names the packages whose tests run in several go test processes at
// once, and how many. cmd/ccrelay's end-to-end tests take most of the
// suite's time (about 500 s of 630 s on a 2-core machine), and most of it is
// spent waiting: for Chromium, Claude Code, relays and daemons starting and
// stopping, and the grace periods the tests cross. Run one after the other
// in one process, they were the suite's critical path while the other
// packages had long finished. Each part runs a share of the package's
// top-level tests, dealt in turn from the list go test -list gives, so every
// test runs exactly once; a test added later is dealt like the others.
var Split = map[string]int{
	"github.com/ccrelay/ccrelay/cmd/ccrelay": 2,
}

// valueFlags are go test's flags (its own and the build's) that take their
// value as the next argument when written without "=".
var valueFlags = map[string]bool{
	"C": true, "asmflags": true, "bench": true, "benchtime": true, "blockprofile": true, "blockprofilerate": true,
	"compiler": true, "count": true, "covermode": true, "coverpkg": true, "coverprofile": true, "cpu": true,
	"cpuprofile": true, "exec": true, "fuzz": true, "fuzzminimizetime": true, "fuzztime": true, "gccgoflags": true,
	"gcflags": true, "installsuffix": true, "ldflags": true, "list": true, "memprofile": true, "memprofilerate": true,
	"mod": true, "modfile": true, "mutexprofile": true, "mutexprofilefraction": true, "o": true, "outputdir": true,
	"overlay": true, "p": true, "parallel": true, "pgo": true, "pkgdir": true, "run": true, "shuffle": true,
	"skip": true, "tags": true, "timeout": true, "toolexec": true, "trace": true, "vet": true, "buildmode": true,
}

// splitArgs separates go test's arguments into flags and package patterns.
// ok is false when the arguments are beyond what splitting handles: flags
// for the test programs after -args, or flags that choose which tests run
// (-run, -list, -bench, -fuzz), which splitting would override.
func splitArgs(args []string) (flags, pkgs []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			pkgs = append(pkgs, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "args", "run", "list", "bench", "fuzz", "json":
			return nil, nil, false
		}
		flags = append(flags, a)
		if !hasValue && valueFlags[name] && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, pkgs, true
}

// goList returns the import paths of the packages that patterns name, run
// in dir.
func goList(dir string, flags, patterns []string) ([]string, error) {
	args := []string{"list", "-e", "-f", "{{.ImportPath}}"}
	for i := 0; i < len(flags); i++ { // the build's flags choose files (-tags) and modes
		name, _, hasValue := strings.Cut(strings.TrimLeft(flags[i], "-"), "=")
		take := name == "tags" || name == "mod" || name == "modfile" || name == "C"
		if take {
			args = append(args, flags[i])
		}
		if !hasValue && valueFlags[name] && i+1 < len(flags) {
			i++
			if take {
				args = append(args, flags[i])
			}
		}
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(patterns, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.Fields(string(out)), nil
}

// testName is a line of go test -list that names a test.
var testName = regexp.MustCompile(`^(Test|Example|Fuzz)[A-Za-z0-9_]*$`)

// listTests returns the top-level tests, examples and fuzz targets of pkg,
// built with flags (the same build the parts run, from the build cache).
func listTests(dir string, flags []string, pkg string) ([]string, error) {
	cmd := exec.Command("go", append(append([]string{"test"}, flags...), "-list", ".", pkg)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -list . %s: %w: %s%s", pkg, err, out, stderr.Bytes())
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if testName.MatchString(l) {
			names = append(names, l)
		}
	}
	return names, nil
}

// deal deals names in turn into n parts (fewer when there are fewer
// names), each a -run pattern that matches exactly its names.
func deal(names []string, n int) []string {
	if n > len(names) {
		n = len(names)
	}
	parts := make([][]string, n)
	for i, name := range names {
		parts[i%n] = append(parts[i%n], regexp.QuoteMeta(name))
	}
	runs := make([]string, n)
	for i, p := range parts {
		runs[i] = "^(" + strings.Join(p, "|") + ")$"
	}
	return runs
}
