// Package codextest runs the real Codex CLI offline for tests: a throwaway
// HOME and CODEX_HOME whose config.toml points Codex's model provider at the
// fake Responses API (internal/fakeresponses) on 127.0.0.1, and the
// environment that keeps Codex off the network.
//
// Codex refuses to put its helper binaries under the system temporary
// folder, and leaves folders of its own in $TMPDIR: the home lives in the
// user's cache folder instead (ccrelay-test/codex-*), with a TMPDIR of its
// own inside it, and the test removes all of it when it ends.
package codextest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/fakeresponses"
)

// Version is the Codex CLI version the tests are written against; .ci/run
// installs exactly this one.
const Version = codex.TestedVersion

// BinEnv names the environment variable holding the codex binary to test
// with.
const BinEnv = "CCRELAY_TEST_CODEX"

// Model is the model the offline config names: one Codex knows (with an
// unknown one it warns and offers no apply_patch).
const Model = "gpt-5.5"

// KeyEnv names the environment variable the fake provider's key is read
// from.
const KeyEnv = "FAKE_API_KEY"

// Binary returns the codex binary to test with: $CCRELAY_TEST_CODEX, else
// `codex` on PATH. Without one the test is skipped, except in CI
// (CI=true), where it fails: CI installs Codex and must run these.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinEnv); p != "" {
		return p
	}
	if p, err := exec.LookPath("codex"); err == nil {
		return p
	}
	msg := "real Codex CLI not found: set " + BinEnv + " or put codex " + Version + " on PATH (npm install @openai/codex@" + Version + ")"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Env is one offline Codex setup. Everything in it lives under Root, which
// the test removes when it ends.
type Env struct {
	// Codex is the binary Run and Command start (set by New; Home leaves
	// it empty).
	Codex string
	// Root holds the rest; it is outside the system temporary folder.
	Root string
	// Home is HOME, CodexHome is CODEX_HOME (Home/.codex, holding
	// config.toml), Tmp is the TMPDIR Codex gets, Project the working
	// folder (holding fakeresponses.EditFile, as PATCHEDIT wants).
	Home, CodexHome, Tmp, Project string
	// API is the fake New started (nil after Home).
	API *fakeresponses.Server
	// Extra is added to Codex's environment.
	Extra []string
}

// cacheRoot is where homes go: the user's cache folder, or the current
// folder's ccrelay-test when there is none.
func cacheRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		if base, err = os.Getwd(); err != nil {
			return "", fmt.Errorf("no folder for a Codex home: %w", err)
		}
	}
	abs, err := filepath.Abs(filepath.Join(base, "ccrelay-test"))
	if err != nil {
		return "", fmt.Errorf("codex home folder: %w", err)
	}
	return abs, nil
}

// staleAfter is the age past which a home another test run left behind
// (a killed run skips its cleanup) is removed.
const staleAfter = 24 * time.Hour

// Home makes a throwaway HOME and CODEX_HOME outside the system temporary
// folder, with a config.toml whose model provider "fake" posts to
// baseURL (a fake Responses API's URL; "/v1" is added unless it ends so),
// and removes them when the test ends.
func Home(t testing.TB, baseURL string) *Env {
	t.Helper()
	parent, err := cacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatalf("codex home: %v", err)
	}
	removeStale(parent, time.Now())
	root, err := os.MkdirTemp(parent, "codex-")
	if err != nil {
		t.Fatalf("codex home: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("removing the codex home: %v", err)
		}
		// The parent goes too once no other test uses it.
		_ = os.Remove(parent)
	})
	e := &Env{Root: root, Home: filepath.Join(root, "home"), Tmp: filepath.Join(root, "tmp"), Project: filepath.Join(root, "project")}
	e.CodexHome = filepath.Join(e.Home, ".codex")
	for _, d := range []string{e.CodexHome, e.Tmp, e.Project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("codex home: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.Project, fakeresponses.EditFile), []byte(fakeresponses.EditBefore), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.CodexHome, "config.toml"), []byte(Config(baseURL, e.Project)), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// removeStale removes the homes under parent older than staleAfter.
func removeStale(parent string, now time.Time) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, ent := range ents {
		if !ent.IsDir() || !strings.HasPrefix(ent.Name(), "codex-") {
			continue
		}
		if info, err := ent.Info(); err == nil && now.Sub(info.ModTime()) > staleAfter {
			_ = os.RemoveAll(filepath.Join(parent, ent.Name()))
		}
	}
}

// Config is the offline config.toml: model Model from provider "fake" at
// baseURL, the key in $KeyEnv, no update check, analytics or feedback, and
// project trusted.
func Config(baseURL, project string) string {
	if !strings.HasSuffix(baseURL, "/v1") {
		baseURL = strings.TrimSuffix(baseURL, "/") + "/v1"
	}
	return fmt.Sprintf(`model = %q
model_provider = "fake"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.fake]
name = "fake offline Responses API"
base_url = %q
wire_api = "responses"
env_key = %q

[projects.%q]
trust_level = "trusted"
`, Model, baseURL, KeyEnv, project)
}

// New starts the fake Responses API and makes a Home for it, for the codex
// Binary returns.
func New(t testing.TB) *Env {
	t.Helper()
	bin := Binary(t)
	api, err := fakeresponses.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	e := Home(t, api.BaseURL())
	e.Codex, e.API = bin, api
	return e
}

// Environ is the process environment for Codex: the throwaway HOME,
// CODEX_HOME and TMPDIR, the fake key, and proxies that lead nowhere for
// every address but the loopback one the fake serves on, so that nothing
// reaches the network.
func (e *Env) Environ() []string {
	return append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + e.Home,
		"CODEX_HOME=" + e.CodexHome,
		"TMPDIR=" + e.Tmp,
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		KeyEnv + "=fake-key",
		"HTTPS_PROXY=http://127.0.0.1:9",
		"HTTP_PROXY=http://127.0.0.1:9",
		"ALL_PROXY=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost",
	}, e.Extra...)
}

// Command is codex with args, run in the project with Environ and no
// stdin (codex exec would read it as more prompt).
func (e *Env) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.Codex, args...)
	cmd.Dir, cmd.Env = e.Project, e.Environ()
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Exec runs `codex exec --json --skip-git-repo-check args…` and returns its
// stdout (JSON lines); it fails the test if codex fails.
func (e *Env) Exec(t testing.TB, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.Command(ctx, append([]string{"exec", "--json", "--skip-git-repo-check"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("codex exec %q: %v\nstderr: %s\nstdout: %.4000s", args, err, errb.String(), out.String())
	}
	return out.Bytes()
}

// Rollouts returns the rollout files under CODEX_HOME/sessions, sorted.
func (e *Env) Rollouts(t testing.TB) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(e.CodexHome, "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.HasSuffix(d.Name(), ".jsonl") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing rollouts: %v", err)
	}
	slices.Sort(out)
	return out
}
