package codextest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/fakeresponses"
)

// TestBinaryHelper is what TestBinaryOutcome runs in a child process; it
// does nothing otherwise.
func TestBinaryHelper(t *testing.T) {
	if os.Getenv("CODEXTEST_BINARY_HELPER") == "" {
		return
	}
	Binary(t)
}

// Without a codex binary, Binary skips, except in CI, where it fails.
func TestBinaryOutcome(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBinaryHelper$", "-test.v")
		cmd.Env = []string{"CODEXTEST_BINARY_HELPER=1", "PATH=" + t.TempDir(), "CI=" + ci, BinEnv + "="}
		out, err := cmd.CombinedOutput()
		if ci == "true" {
			if err == nil || !bytes.Contains(out, []byte("--- FAIL: TestBinaryHelper")) {
				t.Errorf("CI=true: %v\n%s", err, out)
			}
		} else if err != nil || !bytes.Contains(out, []byte("--- SKIP: TestBinaryHelper")) {
			t.Errorf("CI unset: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte(BinEnv)) {
			t.Errorf("the message does not name %s:\n%s", BinEnv, out)
		}
	}
}

// Home makes its folders outside the temporary folder, writes the offline
// config, and removes everything when the test ends.
func TestHome(t *testing.T) {
	var e *Env
	t.Run("inner", func(t *testing.T) {
		e = Home(t, "http://127.0.0.1:4321")
		tmp, _ := filepath.EvalSymlinks(os.TempDir())
		root, _ := filepath.EvalSymlinks(e.Root)
		if strings.HasPrefix(root+"/", tmp+"/") {
			t.Errorf("home %s is in the temporary folder %s", root, tmp)
		}
		cfg, err := os.ReadFile(filepath.Join(e.CodexHome, "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`model = "gpt-5.5"`, `model_provider = "fake"`, `base_url = "http://127.0.0.1:4321/v1"`, `env_key = "FAKE_API_KEY"`, `wire_api = "responses"`} {
			if !strings.Contains(string(cfg), want+"\n") {
				t.Errorf("config.toml lacks %s:\n%s", want, cfg)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(e.Project, fakeresponses.EditFile)); string(b) != fakeresponses.EditBefore {
			t.Errorf("project's %s holds %q", fakeresponses.EditFile, b)
		}
		env := e.Environ()
		for _, want := range []string{"HOME=" + e.Home, "CODEX_HOME=" + e.CodexHome, "TMPDIR=" + e.Tmp, "FAKE_API_KEY=fake-key"} {
			if !slices.Contains(env, want) {
				t.Errorf("environment lacks %s: %q", want, env)
			}
		}
	})
	if _, err := os.Stat(e.Root); !os.IsNotExist(err) {
		t.Fatalf("the home is still there after the test: %v", err)
	}
}

// Homes a killed run left behind go once they are a day old.
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	old, fresh, other := filepath.Join(parent, "codex-old"), filepath.Join(parent, "codex-fresh"), filepath.Join(parent, "other")
	for _, d := range []string{old, fresh, other} {
		os.MkdirAll(filepath.Join(d, "x"), 0o700)
	}
	day := time.Now().Add(-25 * time.Hour)
	os.Chtimes(old, day, day)
	os.Chtimes(other, day, day)
	removeStale(parent, time.Now())
	for d, want := range map[string]bool{old: false, fresh: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", d, err == nil, want)
		}
	}
}

// The real Codex runs offline against the fake: it answers, runs a shell
// command, writes rollouts in the home, and leaves nothing in the
// temporary folder.
func TestRealCodexOffline(t *testing.T) {
	before := codexEntries(t)
	e := New(t)
	t0 := time.Now()
	out := e.Exec(t, "say hi")
	t.Logf("codex exec \"say hi\": %v", time.Since(t0).Round(time.Millisecond))
	if !bytes.Contains(out, []byte(fakeresponses.TextReply)) {
		t.Fatalf("no reply from the fake:\n%s", out)
	}
	out = e.Exec(t, "SHELL: list the files")
	if !bytes.Contains(out, []byte("hello-from-shell")) || !bytes.Contains(out, []byte(fakeresponses.ShellReply)) {
		t.Fatalf("the shell scenario did not run:\n%s", out)
	}
	reqs := e.API.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3: %+v", len(reqs), reqs)
	}
	for _, r := range reqs {
		if r.Model != Model || r.Header.Get("Authorization") != "Bearer fake-key" || r.Status != 200 {
			t.Errorf("request %+v", r)
		}
	}
	if got := e.Rollouts(t); len(got) != 2 {
		t.Fatalf("rollouts %q, want 2", got)
	}
	if after := codexEntries(t); len(after) > len(before) {
		t.Fatalf("codex left %q in the temporary folder", after)
	}
	// Codex keeps its sandbox's mount targets in $TMPDIR: they are in the
	// home's, so it took that one and not the system's.
	if ents, _ := os.ReadDir(e.Tmp); len(ents) == 0 {
		t.Fatalf("nothing in the home's TMPDIR %s: did Codex use another?", e.Tmp)
	}
}

// codexEntries lists what the temporary folders (the test's and /tmp)
// hold with "codex" in their name.
func codexEntries(t *testing.T) []string {
	var out []string
	for _, d := range []string{os.TempDir(), "/tmp"} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.Contains(e.Name(), "codex") && !slices.Contains(out, filepath.Join(d, e.Name())) {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out
}

// CI installs the Codex version the tests are written against.
func TestCIPinsTestedCodexVersion(t *testing.T) {
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CODEX_VERSION=(\S+)$`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run sets no CODEX_VERSION")
	}
	if string(m[1]) != codex.TestedVersion {
		t.Fatalf(".ci/run installs Codex %s, codex.TestedVersion is %s", m[1], codex.TestedVersion)
	}
	if !bytes.Contains(ci, []byte("export CCRELAY_TEST_CODEX\n")) {
		t.Fatal(".ci/run does not export CCRELAY_TEST_CODEX")
	}
}

// The Codex the tests run is the version they are written against.
func TestRealCodexVersion(t *testing.T) {
	bin := Binary(t)
	t0 := time.Now()
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	t.Logf("codex --version: %v", time.Since(t0).Round(time.Millisecond))
	if got := strings.TrimSpace(string(out)); got != "codex-cli "+Version {
		t.Fatalf("%s --version printed %q, want codex-cli %s", bin, got, Version)
	}
}
