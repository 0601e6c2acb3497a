package fuzzmin

import (
	"flag"
	"io"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// Default sets the bound unless the command line gives one, and leaves
// other flag sets alone.
func TestDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 2 * time.Second},
		{[]string{"-test.run", "X"}, 2 * time.Second},
		{[]string{"-test.fuzzminimizetime=1m"}, time.Minute},
		{[]string{"-test.fuzzminimizetime", "0s"}, 0},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		d := fs.Duration(name, time.Minute, "")
		fs.String("test.run", "", "")
		if err := Default(fs, tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if *d != tc.want {
			t.Errorf("%q: %v, want %v", tc.args, *d, tc.want)
		}
	}
	other := flag.NewFlagSet("t", flag.ContinueOnError)
	if err := Default(other, []string{"x"}); err != nil || other.Parsed() {
		t.Errorf("a flag set without the flag: %v, parsed %v", err, other.Parsed())
	}
}

// This package's own TestMain calls Main.
func TestCheck(t *testing.T) { Check(t) }
