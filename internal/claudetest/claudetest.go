// Package claudetest runs the real Claude Code offline for tests: a scratch
// HOME, the fake Messages API on 127.0.0.1, and the environment that keeps
// Claude from reaching the network.
package claudetest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
)

// Version is the Claude Code version the tests are written against; .ci/run
// installs exactly this one.
const Version = claude.TestedVersion

// Find returns the claude binary to test with: $CCRELAY_TEST_CLAUDE, else
// `claude` on PATH. Without one the test is skipped, except in CI
// (CI=true), where it fails: CI installs Claude Code and must run these.
func Find(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CCRELAY_TEST_CLAUDE"); p != "" {
		return p
	}
	if p, err := exec.LookPath("claude"); err == nil {
		return p
	}
	msg := "real Claude Code not found: set CCRELAY_TEST_CLAUDE or put claude " + Version + " on PATH (npm install @anthropic-ai/claude-code@" + Version + ")"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// AlsoEnv names the environment variable that lists more Claude Code
// installs to run the real-Claude scenarios against (paths to their claude
// binaries, separated like PATH): .ci/run sets it to the older pinned
// versions.
const AlsoEnv = "CCRELAY_TEST_CLAUDE_ALSO"

// Install is one installed Claude Code.
type Install struct {
	Version string // as `claude --version` prints it: "2.1.330"
	Path    string
}

// Installs returns the Claude Code installs to run the real-Claude
// scenarios against, oldest first: Find's and those $CCRELAY_TEST_CLAUDE_ALSO
// lists. Each must answer --version; one that does not fails the test.
func Installs(t testing.TB) []Install {
	t.Helper()
	paths := []string{Find(t)}
	for _, p := range filepath.SplitList(os.Getenv(AlsoEnv)) {
		if p != "" && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	var out []Install
	for _, p := range paths {
		// Up to three tries: --version starts all of Claude Code, which a
		// machine busy with the rest of the suite can hold past
		// claude.VersionTimeout.
		var v string
		var err error
		for range 3 {
			if v, err = claude.InstalledVersion(context.Background(), p); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("Claude Code install: %v", err)
		}
		out = append(out, Install{Version: v, Path: p})
	}
	slices.SortStableFunc(out, func(a, b Install) int {
		c, _ := claude.CompareVersions(a.Version, b.Version)
		return c
	})
	return out
}

// Env is one offline Claude Code setup.
type Env struct {
	Claude  string
	Home    string
	Project string
	API     *fakeapi.Server
	// Extra is added to Claude's environment (e.g.
	// CLAUDE_CODE_MAX_RETRIES=1 to make a failing API give up soon).
	Extra []string
}

// New starts the fake API with rules and makes a scratch HOME and project,
// for the Claude Code Find returns.
func New(t testing.TB, rules ...fakeapi.Rule) *Env {
	t.Helper()
	return NewWith(t, Find(t), rules...)
}

// NewWith is New for the claude binary at bin.
func NewWith(t testing.TB, bin string, rules ...fakeapi.Rule) *Env {
	t.Helper()
	api, err := fakeapi.Start(rules...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	e := &Env{Claude: bin, Home: t.TempDir(), Project: filepath.Join(t.TempDir(), "project"), API: api}
	if err := os.MkdirAll(e.Project, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		os.WriteFile(filepath.Join(e.Project, f), []byte(f+"\n"), 0o644)
	}
	// Seed what interactive mode asks on first start (onboarding, the
	// custom API key, the folder trust dialog).
	cfg := map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{"dummy"}, "rejected": []string{}},
		"projects":               map[string]any{e.Project: map[string]any{"hasTrustDialogAccepted": true}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(e.Home, ".claude.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// Environ is the process environment for Claude.
func (e *Env) Environ() []string {
	return append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + e.Home,
		"TERM=xterm-256color",
		"ANTHROPIC_BASE_URL=" + e.API.URL,
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"IS_SANDBOX=1",
		"CLAUDE_CODE_TMPDIR=" + filepath.Join(e.Home, "tmp"),
	}, e.Extra...)
}

// ProjectDir is where Claude writes this project's transcripts.
func (e *Env) ProjectDir(t testing.TB) string {
	d, err := claude.ProjectDir(filepath.Join(e.Home, ".claude"), e.Project)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Run runs claude with args (and stdin, if not nil) and returns its stdout.
func (e *Env) Run(t testing.TB, stdin []byte, args ...string) []byte {
	t.Helper()
	out, errOut, err := e.RunStatus(stdin, args...)
	if err != nil {
		t.Fatalf("claude %v: %v\nstderr: %s\nstdout: %.2000s", args, err, errOut, out)
	}
	return out
}

// RunStatus runs claude like Run but returns how it exited instead of
// failing the test: for runs that end on an error (an API error exits 1).
func (e *Env) RunStatus(stdin []byte, args ...string) (stdout []byte, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Claude, args...)
	cmd.Dir, cmd.Env = e.Project, e.Environ()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.Bytes(), errb.String(), err
}
