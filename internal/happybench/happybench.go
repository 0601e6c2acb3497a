// Package happybench runs happy's TypeScript session mapper, unmodified, as
// the baseline of ccrelay's mapper benchmarks: ts/ holds happy's files as
// they are at Commit, driver.ts (ours) reads a transcript as happy's session
// scanner does and maps each message, and Build bundles the two with esbuild
// for Node. The npm packages it needs (Packages) are installed by .ci/run
// into a folder that $CCRELAY_TEST_HAPPY names.
package happybench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Commit is the commit of github.com/slopus/happy the files under ts/ come
// from.
const Commit = "2c8ecacc19f14abd81111a4605ac8c7f6bedb7e1"

// DirEnv names the environment variable holding the folder Packages are
// installed in (its node_modules).
const DirEnv = "CCRELAY_TEST_HAPPY"

// Packages are the npm packages the driver is bundled with, at exact
// versions: esbuild, and happy's runtime dependencies at the versions its
// lockfile resolves at Commit. .ci/run installs exactly these.
var Packages = []string{"esbuild@0.28.2", "zod@4.4.3", "@paralleldrive/cuid2@2.3.1", "@noble/hashes@1.8.0"}

// Source returns the folder holding driver.ts and ts/ (this package's).
func Source() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("happybench: no source location")
	}
	return filepath.Dir(file), nil
}

// Dir returns the folder Packages are installed in: $CCRELAY_TEST_HAPPY.
// Without it the test is skipped, except in CI (CI=true), where it fails:
// CI installs them and must run the baseline. A folder whose packages are
// not the pinned versions fails the test.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv(DirEnv)
	if dir == "" {
		msg := "happy's mapper baseline not installed: set " + DirEnv + " to a folder where npm installed " + strings.Join(Packages, " ") + " (.ci/run does)"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	if err := CheckInstalled(dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// CheckInstalled reports whether dir's node_modules holds Packages at their
// pinned versions.
func CheckInstalled(dir string) error {
	for _, p := range Packages {
		i := strings.LastIndex(p, "@")
		name, want := p[:i], p[i+1:]
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil {
			return fmt.Errorf("happybench: %s not installed in %s: %w", name, dir, err)
		}
		var pkg struct{ Version string }
		if err := json.Unmarshal(b, &pkg); err != nil {
			return fmt.Errorf("happybench: %s's package.json: %w", name, err)
		}
		if pkg.Version != want {
			return fmt.Errorf("happybench: %s %s installed in %s, want %s", name, pkg.Version, dir, want)
		}
	}
	return nil
}

// Bundle bundles driver.ts and happy's files with the esbuild of dir into
// out (a .js file Node 20 runs).
func Bundle(ctx context.Context, dir, out string) error {
	src, err := Source()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "esbuild"), "driver.ts",
		"--bundle", "--platform=node", "--format=cjs", "--target=node20", "--log-level=warning",
		"--alias:@slopus/happy-wire=./ts/packages/happy-wire/src/index.ts",
		"--outfile="+out)
	cmd.Dir = src
	// The packages are found in dir's node_modules, not beside the sources.
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("happybench: esbuild: %w\n%s", err, b)
	}
	return nil
}

// Build bundles the driver into a temporary folder of tb's (Dir's packages)
// and returns the bundle's path.
func Build(tb testing.TB) string {
	tb.Helper()
	dir := Dir(tb)
	out := filepath.Join(tb.TempDir(), "happy-driver.js")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Bundle(ctx, dir, out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Summary is what the driver prints last: the transcript's non-blank
// lines, the messages mapped (after happy's validation and its skip of
// repeated keys), and the envelopes by event type.
type Summary struct {
	Lines            int            `json:"lines"`
	Messages         int            `json:"messages"`
	TranscriptEvents int            `json:"transcriptEvents"`
	Duplicates       int            `json:"duplicates"`
	Envelopes        int            `json:"envelopes"`
	Kinds            map[string]int `json:"kinds"`
}

// Result is one run of the driver.
type Result struct {
	Summary
	// Lines are the envelopes as JSON, one a line (Run with withJSON).
	JSON [][]byte
	// Wall is the process's time from start to exit, CPU its user and
	// system time.
	Wall, CPU time.Duration
}

// Run runs the bundle under node on file; withJSON also collects each
// envelope as JSON.
func Run(ctx context.Context, bundle, file string, withJSON bool) (Result, error) {
	args := []string{bundle}
	if withJSON {
		args = append(args, "--json")
	}
	args = append(args, file)
	cmd := exec.CommandContext(ctx, "node", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := Result{Wall: time.Since(t0)}
	if err != nil {
		return r, fmt.Errorf("happybench: node %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	lines := bytes.Split(bytes.TrimSuffix(stdout.Bytes(), []byte("\n")), []byte("\n"))
	last := lines[len(lines)-1]
	if err := json.Unmarshal(last, &r.Summary); err != nil {
		return r, fmt.Errorf("happybench: the driver's summary %q: %w", last, err)
	}
	if withJSON {
		r.JSON = lines[:len(lines)-1]
	}
	return r, nil
}
