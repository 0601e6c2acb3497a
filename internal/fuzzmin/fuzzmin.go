// Package fuzzmin bounds the time the fuzzing engine spends minimizing an
// input, for every package of the module with a fuzz target (a test of
// this package finds one whose TestMain does not call Main).
//
// `go test -fuzz` minimizes every input that finds new coverage before it
// goes on: it runs the target again with each byte of the input removed,
// then with each span removed, a number of runs that grows with the square
// of the input's length, for up to -fuzzminimizetime (60 s by default) per
// input. An input of a structured format rarely loses a byte and keeps its
// new coverage, so a mutated record of a kilobyte or two kept the engine
// minimizing for the whole minute, its count of runs frozen ("execs: 53
// (0/sec)"), input after input. The first passes, which remove what can
// go, take a fraction of a second; the rest is what the bound cuts.
package fuzzmin

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// Time is the default of -test.fuzzminimizetime in the packages that call
// Default. A -fuzzminimizetime on the command line wins (for instance
// `-fuzzminimizetime 60s` to minimize a crasher further).
const Time = "2s"

const name = "test.fuzzminimizetime"

// Default parses args into fs unless fs is parsed already, then sets its
// -test.fuzzminimizetime to Time unless args set it. Main calls it from
// TestMain, before m.Run.
func Default(fs *flag.FlagSet, args []string) error {
	if fs.Lookup(name) == nil {
		return nil // not a test binary's flags
	}
	if !fs.Parsed() {
		if err := fs.Parse(args); err != nil {
			return err
		}
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if set {
		return nil
	}
	if err := fs.Set(name, Time); err != nil {
		return fmt.Errorf("fuzzmin: %w", err)
	}
	return nil
}

// Main is a package's TestMain: the default bound, then its tests.
func Main(m *testing.M) int {
	if err := Default(flag.CommandLine, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return m.Run()
}

// Check fails t unless -test.fuzzminimizetime is Time or set on the
// command line: the package's TestMain calls Main.
func Check(t testing.TB) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no -%s flag", name)
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set && f.Value.String() != Time {
		t.Fatalf("-%s is %s, want %s: TestMain should call fuzzmin.Main", name, f.Value, Time)
	}
}
