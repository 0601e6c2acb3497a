package codex

import (
	"context"
	"fmt"
	"strings"

	"github.com/ccrelay/ccrelay/claude"
)

// TestedVersion is the Codex CLI version ccrelay is tested with: CI installs
// exactly it (.ci/run), the rollout fixtures in testdata/0.169.0 come from
// it, and the mapper reads its rollout format.
const TestedVersion = "0.169.0"

// VersionTimeout bounds `codex --version`.
const VersionTimeout = claude.VersionTimeout

// VersionWarning is what to tell the user about running Codex version v:
// "" for TestedVersion (or a version that cannot be read), else a sentence
// saying that ccrelay was not tested with it. Unlike Claude Code's, an
// older Codex is warned about too: its rollout format changed from version
// to version (0.169.0 added ordinals, typed item_completed events and
// token_usage_record), so an older one may be shown wrongly as well.
func VersionWarning(v string) string {
	c, ok := claude.CompareVersions(v, TestedVersion)
	if !ok || c == 0 {
		return ""
	}
	rel := "newer"
	if c < 0 {
		rel = "older"
	}
	return "Codex " + strings.TrimSpace(v) + " is " + rel + " than " + TestedVersion +
		", the Codex version ccrelay was tested with: some of what Codex does may be missing or shown wrongly"
}

// InstalledVersion runs `codex --version` and returns the version it prints
// ("codex-cli 0.169.0" gives "0.169.0").
func InstalledVersion(ctx context.Context, bin string) (string, error) {
	out, err := claude.VersionOutput(ctx, bin)
	if err != nil {
		return "", err
	}
	v, ok := ParseVersionOutput(string(out))
	if !ok {
		return "", fmt.Errorf("%s --version printed %.80q, not a version", bin, out)
	}
	return v, nil
}

// ParseVersionOutput reads the version from what `codex --version` prints
// ("codex-cli 0.169.0").
func ParseVersionOutput(out string) (string, bool) {
	f := strings.Fields(out)
	if len(f) == 0 {
		return "", false
	}
	v := f[len(f)-1]
	if _, ok := claude.ParseVersion(v); !ok {
		return "", false
	}
	return v, true
}
