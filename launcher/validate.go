package launcher

import (
	"errors"
	"fmt"
	"regexp"
)

// What reaches Claude's command line from outside (the app, the hook) is
// checked here first, and always passed as one argv item (--flag=value), so
// that no value can become a flag of its own.

// sessionIDPattern is Claude Code's session id: a UUID.
var sessionIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidSessionID reports whether id has the form of a Claude Code session
// id (a UUID).
func ValidSessionID(id string) bool { return sessionIDPattern.MatchString(id) }

// MaxModelName bounds a model name or alias from the app.
const MaxModelName = 128

// modelPattern is a model alias or name as Claude Code takes them ("opus",
// "default", "claude-opus-4-5-20251101", "sonnet[1m]", a Bedrock or Vertex
// id such as "us.anthropic.claude-…:0" or "claude-…@20250929"): it starts
// with a letter or digit, never with "-".
var modelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]*$`)

// CheckModel refuses a model that is not a plain model name or alias.
func CheckModel(model string) error {
	switch {
	case model == "":
		return errors.New("no model given")
	case len(model) > MaxModelName:
		return fmt.Errorf("model name too long (%d bytes, at most %d)", len(model), MaxModelName)
	case !modelPattern.MatchString(model):
		return fmt.Errorf("%q is not a model name or alias (letters, digits and . _ : @ / [ ] -, not starting with -)", model)
	}
	return nil
}

// PermissionBypass is the permission mode that runs every tool without
// asking: the app may choose it only when ccrelay was started with the
// opt-in (RemoteOptions.AllowBypass, --allow-bypass-from-app).
const PermissionBypass = "bypassPermissions"

// permissionModes are the modes Claude Code 2.1.330 takes (`claude --help`:
// acceptEdits, auto, bypassPermissions, manual, dontAsk, plan; "default" is
// taken too and is what "manual" means).
var permissionModes = map[string]bool{
	"default": true, "manual": true, "acceptEdits": true, "auto": true, "dontAsk": true, "plan": true,
	PermissionBypass: true,
}

// ErrBypassNotAllowed is the reason bypassPermissions is refused.
var ErrBypassNotAllowed = errors.New("bypassPermissions from the app is off on this machine (start ccrelay with --allow-bypass-from-app to allow it)")

// CheckPermissionMode refuses a mode Claude Code does not know, and
// bypassPermissions unless allowBypass.
func CheckPermissionMode(mode string, allowBypass bool) error {
	if !permissionModes[mode] {
		if len(mode) > MaxModelName {
			mode = mode[:MaxModelName] + "…"
		}
		return fmt.Errorf("unknown permission mode %q (default, acceptEdits, plan, auto, dontAsk or bypassPermissions)", mode)
	}
	if mode == PermissionBypass && !allowBypass {
		return ErrBypassNotAllowed
	}
	return nil
}
