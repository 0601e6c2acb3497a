package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A package named in split runs in parts at once, beside the other
// packages: its two tests that each wait for the other to start pass only
// when they run in two processes at once; every test runs once, and a test
// that fails is named with its package.
func TestRunSplitsPackage(t *testing.T) {
	dir := t.TempDir()
	const waits = `package slow

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// meet says this test started and waits until other did.
func meet(t *testing.T, me, other string) {
	dir := os.Getenv("GOTEST_SAMPLE_MEET")
	if err := os.WriteFile(filepath.Join(dir, me), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, other)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never started while %s ran", other, me)
		}
	}
}

func TestA(t *testing.T) { meet(t, "a", "b") }

func TestB(t *testing.T) { meet(t, "b", "a") }

func TestC(t *testing.T) {
	if os.Getenv("GOTEST_SAMPLE_FAIL") != "" {
		t.Fatal("asked to fail")
	}
}
`
	files := map[string]string{
		"go.mod":            "module example.com/m\n\ngo 1.26\n",
		"m_test.go":         "package m\n\nimport \"testing\"\n\nfunc TestRoot(t *testing.T) {}\n",
		"slow/slow_test.go": waits,
	}
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name    string
		fail    bool
		code    int
		closing string
		has     string
	}{
		{"passing", false, 0, "4 passed, 0 failed, 0 skipped", "ok  \texample.com/m/slow"},
		{"failing", true, 1, "3 passed, 1 failed, 0 skipped", "failed:\n  example.com/m/slow TestC\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOTEST_SAMPLE_MEET", t.TempDir())
			if tt.fail {
				t.Setenv("GOTEST_SAMPLE_FAIL", "1")
			}
			var out, errb bytes.Buffer
			code := run(dir, []string{"-count=1", "./..."}, &out, &errb, true, map[string]int{"example.com/m/slow": 2})
			if code != tt.code {
				t.Errorf("exit code %d, want %d\n%s%s", code, tt.code, out.String(), errb.String())
			}
			if last := lastLine(out.String()); last != tt.closing {
				t.Errorf("closing line %q, want %q\n%s%s", last, tt.closing, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tt.has) {
				t.Errorf("output lacks %q:\n%s", tt.has, out.String())
			}
		})
	}
}

func TestSplitArgs(t *testing.T) {
	for _, tt := range []struct {
		args        []string
		flags, pkgs []string
		ok          bool
	}{
		{[]string{"-race", "./..."}, []string{"-race"}, []string{"./..."}, true},
		{[]string{"-timeout", "30m", "-count=1", "./a", "./b"}, []string{"-timeout", "30m", "-count=1"}, []string{"./a", "./b"}, true},
		{[]string{"-tags", "x", "./...", "-short"}, []string{"-tags", "x", "-short"}, []string{"./..."}, true},
		{[]string{"-run", "TestX", "./..."}, nil, nil, false},
		{[]string{"-run=TestX", "./..."}, nil, nil, false},
		{[]string{"./...", "-args", "-v"}, nil, nil, false},
		{[]string{"-bench=.", "./..."}, nil, nil, false},
	} {
		flags, pkgs, ok := splitArgs(tt.args)
		if !reflect.DeepEqual(flags, tt.flags) || !reflect.DeepEqual(pkgs, tt.pkgs) || ok != tt.ok {
			t.Errorf("splitArgs(%q) = %q %q %v, want %q %q %v", tt.args, flags, pkgs, ok, tt.flags, tt.pkgs, tt.ok)
		}
	}
}

func TestDeal(t *testing.T) {
	got := deal([]string{"TestA", "TestB", "TestC", "Example_x"}, 2)
	if want := []string{"^(TestA|TestC)$", "^(TestB|Example_x)$"}; !reflect.DeepEqual(got, want) {
		t.Errorf("deal: %q, want %q", got, want)
	}
	if got := deal([]string{"TestA"}, 3); !reflect.DeepEqual(got, []string{"^(TestA)$"}) {
		t.Errorf("deal of one test in 3: %q", got)
	}
}
