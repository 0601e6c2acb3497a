package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// The README's second command is the test command, and .ci/run runs exactly
// it.
func TestREADMETestCommandIsCI(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no sh block")
	}
	cmds := strings.Split(strings.TrimSpace(m[1]), "\n")
	if len(cmds) != 2 {
		t.Fatalf("README.md's first block has %d commands, want 2: %q", len(cmds), cmds)
	}
	if !strings.HasPrefix(cmds[1], "go run ./internal/gotest ") {
		t.Fatalf("README.md's test command %q does not use internal/gotest", cmds[1])
	}
	for _, l := range strings.Split(readRepoFile(t, ".ci/run"), "\n") {
		if l == cmds[1] {
			return
		}
	}
	t.Fatalf(".ci/run has no line %q (the README's test command)", cmds[1])
}

// The README's links work in a clone of the repository alone.
func TestREADMELinks(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	links := regexp.MustCompile(`\]\(([^)#\s]+)[^)]*\)`).FindAllStringSubmatch(readme, -1)
	if len(links) == 0 {
		t.Fatal("no links found: the pattern is wrong")
	}
	for _, l := range links {
		target := l[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		clean := filepath.Clean(target)
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "..") {
			t.Errorf("link %s leads out of the repository", target)
			continue
		}
		if _, err := os.Stat(filepath.Join(root, clean)); err != nil {
			t.Errorf("link %s: %v", target, err)
		}
	}
	if regexp.MustCompile(`(^|[^.])\.\./`).MatchString(readme) {
		t.Error("README.md names a path outside the repository (../)")
	}
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// No compiled program is committed (they are built by the tests and ignored
// by .gitignore).
func TestNoBinariesCommitted(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git ls-files: %v", err)
		}
		t.Skipf("not a git checkout (git ls-files: %v)", err)
	}
	magics := [][]byte{
		[]byte("\x7fELF"),
		{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe}, // Mach-O 32-bit
		{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe}, // Mach-O 64-bit
	}
	n := 0
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		k, _ := io.ReadFull(f, head)
		f.Close()
		n++
		for _, m := range magics {
			if bytes.Equal(head[:k], m) {
				t.Errorf("%s is a compiled program: remove it from git (go build output belongs in .gitignore)", name)
			}
		}
	}
	if n == 0 {
		t.Fatal("git ls-files listed no file")
	}
}
