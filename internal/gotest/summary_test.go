package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

type summaryCase struct {
	name    string
	file    string // in testdata, or a path
	goCode  int    // go test's exit code
	ci      bool
	code    int
	closing string
	skipped []string
	failed  []string // in any order
	shown   []string // printed
	hidden  []string // not printed
}

// The summarizer on recorded `go test -json` output (testdata/*.json, from a
// small module whose packages pass, fail, skip, panic, time out, fail to
// build or exit from TestMain).
func TestSummary(t *testing.T) {
	tests := []summaryCase{
		{
			name: "mixed", file: "mixed.json", goCode: 1, code: 1,
			closing: "10 passed, 6 failed, 3 skipped",
			skipped: []string{
				"example.com/sample/skip TestNeedsBrowser: skip_test.go:5: no chromium on PATH (set CCRELAY_TEST_CHROMIUM)",
				"example.com/sample/skip TestPartly/there: skip_test.go:11: needs root",
				"example.com/sample/skip TestSkipNow: (no reason given)",
			},
			failed: []string{
				"example.com/sample/buildfail: build failed",
				"example.com/sample/fail TestBad",
				"example.com/sample/fail TestSub/broken",
				"example.com/sample/fail TestSub",
				"example.com/sample/mainexit",
				"example.com/sample/panics TestPanics",
			},
			shown: []string{
				"ok  \texample.com/sample/pass\t",
				"?   \texample.com/sample/nofiles\t[no test files]\n",
				"FAIL\texample.com/sample/fail\t",
				"    fail_test.go:8: context before the failure\n    fail_test.go:9: got 1, want 2\n--- FAIL: TestBad",
				"subtest broke",
				"panic: assignment to entry in nil map",
				"buildfail_test.go:5:40: cannot use \"s\"",
				"FAIL\texample.com/sample/buildfail [build failed]",
				"setup failed: no fixture\nFAIL\texample.com/sample/mainexit",
			},
			hidden: []string{"a log line that is not shown", "=== RUN", "=== PAUSE", "=== CONT", "--- PASS", "\nPASS\n"},
		},
		{
			name: "timeout: the test still running counts as failed", file: "timeout.json", goCode: 1, code: 1,
			closing: "1 passed, 1 failed, 0 skipped",
			failed:  []string{"example.com/sample/hang TestHangs"},
			shown:   []string{"panic: test timed out after 2s", "FAIL\texample.com/sample/hang\t2.007s"},
			hidden:  []string{"TestQuick"},
		},
		{
			name: "cached and no test files", file: "cached.json", code: 0,
			closing: "4 passed, 0 failed, 0 skipped",
			shown:   []string{"ok  \texample.com/sample/pass\t(cached)\n", "?   \texample.com/sample/nofiles\t[no test files]\n"},
			hidden:  []string{"skipped:", "failed:"},
		},
		{
			name: "go test failed without a failed test (a bad flag)", file: "cached.json", goCode: 2, code: 2,
			closing: "4 passed, 0 failed, 0 skipped",
			shown:   []string{"go test exited with status 2"},
		},
	}
	// Skips: fine on a laptop, a failure under CI=true.
	skipOnly := filterPackage(t, "mixed.json", "example.com/sample/skip")
	tests = append(tests,
		summaryCase{name: "skips outside CI", file: skipOnly, code: 0, closing: "3 passed, 0 failed, 3 skipped", hidden: []string{"CI=true"}},
		summaryCase{name: "skips under CI=true", file: skipOnly, ci: true, code: 1, closing: "3 passed, 0 failed, 3 skipped", shown: []string{"CI=true: every test must run here, and 3 did not"}},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(tt.file)
			if err != nil {
				data, err = os.ReadFile("testdata/" + tt.file)
			}
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			s := newSummary(&out)
			if err := s.read(bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			code := s.finish(tt.goCode, tt.ci)
			got := out.String()
			if code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if last := lastLine(got); last != tt.closing {
				t.Errorf("closing line %q, want %q\n%s", last, tt.closing, got)
			}
			if tt.skipped != nil {
				if g := section(got, "skipped:"); !slices.Equal(g, tt.skipped) {
					t.Errorf("skipped:\n got %q\nwant %q", g, tt.skipped)
				}
			}
			if tt.failed != nil {
				if g := section(got, "failed:"); !sameSet(g, tt.failed) {
					t.Errorf("failed:\n got %q\nwant %q", g, tt.failed)
				}
			}
			for _, w := range tt.shown {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.hidden {
				if strings.Contains(got, w) {
					t.Errorf("output has %q:\n%s", w, got)
				}
			}
		})
	}
}

// A line that is not an event (go test prints some) passes through.
func TestSummaryPassesOtherLines(t *testing.T) {
	var out bytes.Buffer
	s := newSummary(&out)
	s.read(strings.NewReader("not json\n{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"T\"}\n"))
	s.finish(0, false)
	if want := "not json\n1 passed, 0 failed, 0 skipped\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return l[len(l)-1]
}

// section returns the indented lines under a heading line.
func section(out, heading string) []string {
	var got []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == heading:
			in = true
		case in && strings.HasPrefix(l, "  "):
			got = append(got, strings.TrimPrefix(l, "  "))
		default:
			in = false
		}
	}
	return got
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// filterPackage writes the events of one package of a recording to a file
// and returns its path.
func filterPackage(t *testing.T, file, pkg string) string {
	data, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if strings.Contains(l, `"Package":"`+pkg+`"`) {
			b.WriteString(l)
		}
	}
	p := t.TempDir() + "/" + file
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWithTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"-race", "./..."}, []string{"-timeout=" + PackageTimeout, "-race", "./..."}},
		{[]string{"-timeout=5m", "./..."}, []string{"-timeout=5m", "./..."}},
		{[]string{"-timeout", "5m", "./..."}, []string{"-timeout", "5m", "./..."}},
	} {
		if got := withTimeout(tc.in); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("withTimeout(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
