package launcher

import (
	"runtime"
	"strings"
)

// hookEntry is the SessionStart hook Claude runs for argv, in the form that
// works with how Claude Code (2.1.330) runs hooks on goos:
//
//   - A hook with only "command" runs through a shell: /bin/sh on Unix; on
//     Windows Git Bash when it is installed, else PowerShell, two shells
//     that quote differently (Claude turns the backslashes of its own
//     variables into slashes for Git Bash, and adds PowerShell statements
//     after the command). On Unix argv is quoted for sh.
//   - A hook with "args" (exec form) is spawned directly, with no shell:
//     nothing to quote. Windows uses it, so the hook works whichever shell
//     the machine has, and a path with spaces, quotes or $ stays whole.
//
// An older Claude Code that does not know "args" would run the command
// alone through its shell: on Windows an unquoted path with backslashes,
// which Git Bash cannot run. The hook fails then, rather than starting
// ccrelay without its arguments.
func hookEntry(goos string, argv []string) map[string]any {
	if goos == "windows" {
		return map[string]any{"type": "command", "command": argv[0], "args": append([]string{}, argv[1:]...)}
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return map[string]any{"type": "command", "command": strings.Join(quoted, " ")}
}

// hookOS is the platform whose hook form writeSettings uses (a test sets
// another, to run the Windows form with a real Claude on Linux).
var hookOS = runtime.GOOS

// HookEntry is the hook entry, in Claude Code's settings, that runs argv
// on this platform (see hookEntry).
func HookEntry(argv []string) map[string]any { return hookEntry(hookOS, argv) }
