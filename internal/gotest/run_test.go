package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gotest runs go test for real: a module with a passing and a skipping test
// passes on a laptop and fails under CI=true; a failing test fails it.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"m_test.go": `package m

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) {}

func TestSkips(t *testing.T) { t.Skip("needs a thing") }

func TestFailsWhenAsked(t *testing.T) {
	if os.Getenv("GOTEST_SAMPLE_FAIL") != "" {
		t.Fatal("asked to fail")
	}
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		ci      bool
		fail    bool
		code    int
		closing string
		has     string
	}{
		{"laptop", false, false, 0, "2 passed, 0 failed, 1 skipped", "example.com/m TestSkips: m_test.go:10: needs a thing"},
		{"CI", true, false, 1, "2 passed, 0 failed, 1 skipped", "CI=true: every test must run here, and 1 did not"},
		{"failure", false, true, 1, "1 passed, 1 failed, 1 skipped", "m_test.go:14: asked to fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fail {
				t.Setenv("GOTEST_SAMPLE_FAIL", "1")
			}
			var out, errb bytes.Buffer
			code := run(dir, []string{"-count=1", "./..."}, &out, &errb, tt.ci, nil)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\n%s%s", code, tt.code, out.String(), errb.String())
			}
			if last := lastLine(out.String()); last != tt.closing {
				t.Errorf("closing line %q, want %q", last, tt.closing)
			}
			if !strings.Contains(out.String(), tt.has) {
				t.Errorf("output lacks %q:\n%s", tt.has, out.String())
			}
		})
	}
}
