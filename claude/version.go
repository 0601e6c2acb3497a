package claude

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// TestedVersion is the Claude Code version ccrelay is tested with: the
// corpus's own captures come from it, CI installs exactly it (.ci/run) and
// `ccrelay version` names it. It is the newest version CI runs the
// real-Claude scenarios against (docs/compatibility.md lists them all).
const TestedVersion = "2.1.330"

// RetriesInOrderSince is the oldest Claude Code version known to write an
// API retry to the transcript when it happens (system api_error records);
// 2.1.197 writes a turn's retries only with the message that follows them,
// and not at all when it exits first.
const RetriesInOrderSince = "2.1.330"

// RetriesWrittenLate reports whether Claude Code version writes its API
// retries to the transcript after the message that follows them (false
// for a version it cannot read: records of unknown versions are taken as
// they come).
func RetriesWrittenLate(version string) bool {
	c, ok := CompareVersions(version, RetriesInOrderSince)
	return ok && c < 0
}

// VersionTimeout bounds `claude --version`.
const VersionTimeout = 5 * time.Second

// ParseVersion reads a version such as "2.1.330" or Claude's own
// "2.1.330 (Claude Code)" into its numbers.
func ParseVersion(s string) ([]int, bool) {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " -+"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimPrefix(s, "v")
	if s == "" {
		return nil, false
	}
	var out []int
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// CompareVersions returns -1, 0 or 1 as a is older than, the same as or
// newer than b; ok is false when either is not a version.
func CompareVersions(a, b string) (cmp int, ok bool) {
	va, oka := ParseVersion(a)
	vb, okb := ParseVersion(b)
	if !oka || !okb {
		return 0, false
	}
	for i := 0; i < max(len(va), len(vb)); i++ {
		var x, y int
		if i < len(va) {
			x = va[i]
		}
		if i < len(vb) {
			y = vb[i]
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
	}
	return 0, true
}

// VersionWarning is what to tell the user about running Claude Code
// version v: "" for a version no newer than TestedVersion (or one that
// cannot be read), else a sentence saying that ccrelay was not tested with it.
func VersionWarning(v string) string {
	if c, ok := CompareVersions(v, TestedVersion); !ok || c <= 0 {
		return ""
	}
	return "Claude Code " + strings.TrimSpace(v) + " is newer than " + TestedVersion +
		", the newest version ccrelay was tested with: some of what Claude does may be missing or shown wrongly"
}

// InstalledVersion runs `claude --version` and returns the version it
// prints ("2.1.330").
func InstalledVersion(ctx context.Context, bin string) (string, error) {
	out, err := VersionOutput(ctx, bin)
	if err != nil {
		return "", err
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if _, ok := ParseVersion(v); !ok {
		return "", fmt.Errorf("%s --version printed %.80q, not a version", bin, out)
	}
	return v, nil
}

// VersionOutput runs `bin --version` and returns what it printed, giving
// up at VersionTimeout. Killed at the timeout, the program may leave a
// child holding its output open (a launcher's binary): the wait for that
// output ends too, a second later.
func VersionOutput(ctx context.Context, bin string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, VersionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", bin, err)
	}
	return out, nil
}
