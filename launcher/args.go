package launcher

import (
	"errors"
	"strings"

	"github.com/ccrelay/ccrelay/claude"
)

// Claude Code's options that take a value (--flag value or --flag=value);
// variadic ones take every following argument that is not an option. Any
// other option is taken as a switch.
var (
	valueFlags = map[string]bool{
		"--model": true, "--permission-mode": true, "--session-id": true, "--settings": true,
		"--append-system-prompt": true, "--system-prompt": true, "--output-format": true, "--input-format": true,
		"--fallback-model": true, "--agents": true, "--agent": true, "--setting-sources": true,
		"--permission-prompt-tool": true, "--max-turns": true, "--max-budget-usd": true, "--json-schema": true,
	}
	variadicFlags = map[string]bool{
		"--allowedTools": true, "--allowed-tools": true, "--disallowedTools": true, "--disallowed-tools": true,
		"--add-dir": true, "--mcp-config": true, "--plugin-dir": true, "--betas": true, "--tools": true,
	}
	// optionalValueFlags take a value only when one follows.
	optionalValueFlags = map[string]bool{"--resume": true, "-r": true, "--debug": true, "-d": true}
)

// settingFlags are the user's options that remote mode keeps: what Claude
// runs with (model, permission mode, tool rules, folders, MCP servers,
// settings), never what it does at start (a prompt, a session to resume).
var settingFlags = map[string]bool{
	"--model": true, "--permission-mode": true,
	"--allowedTools": true, "--allowed-tools": true, "--disallowedTools": true, "--disallowed-tools": true,
	"--add-dir": true, "--mcp-config": true, "--settings": true,
}

// argItem is one option with its values (or a positional argument: name
// "").
type argItem struct {
	name string
	args []string // as given
}

// splitArgs cuts a command line into options with their values and
// positional arguments.
func splitArgs(args []string) []argItem {
	var out []argItem
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			for _, p := range args[i+1:] {
				out = append(out, argItem{args: []string{"--", p}})
			}
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, argItem{args: []string{a}})
			continue
		}
		name, _, joined := strings.Cut(a, "=")
		it := argItem{name: name, args: []string{a}}
		switch {
		case joined:
		case valueFlags[name] && i+1 < len(args):
			i++
			it.args = append(it.args, args[i])
		case variadicFlags[name]:
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				it.args = append(it.args, args[i])
			}
		case optionalValueFlags[name] && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
			i++
			it.args = append(it.args, args[i])
		}
		out = append(out, it)
	}
	return out
}

func joinArgs(items []argItem) []string {
	var out []string
	for _, it := range items {
		if it.name == "" && len(it.args) == 2 && it.args[0] == "--" {
			continue // a positional after --: a prompt, dropped
		}
		out = append(out, it.args...)
	}
	return out
}

// RemoteArgs are the user's arguments that remote mode passes on: the
// setting-like options (settingFlags), minus those named in drop (set by
// ccrelay itself).
func RemoteArgs(user []string, drop ...string) []string {
	var keep []argItem
	for _, it := range splitArgs(user) {
		if settingFlags[it.name] && !contains(drop, it.name) {
			keep = append(keep, it)
		}
	}
	return joinArgs(keep)
}

// ResumeArgs are the user's arguments for a Claude that continues a
// session: without --session-id, --continue, --resume (ccrelay adds its
// own) or a prompt.
func ResumeArgs(user []string) []string {
	var keep []argItem
	for _, it := range splitArgs(user) {
		switch it.name {
		case "", "--session-id", "--continue", "-c", "--resume", "-r", "--fork-session":
			continue
		}
		keep = append(keep, it)
	}
	return joinArgs(keep)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ForkParent is the session a command line forks (--resume ID with
// --fork-session), or "" (no fork, or a fork of a session not named:
// --continue, or --resume without an id).
func ForkParent(args []string) string {
	fork, parent := false, ""
	for _, it := range splitArgs(args) {
		switch it.name {
		case "--fork-session":
			fork = true
		case "--resume", "-r":
			v := ""
			if name, val, ok := strings.Cut(it.args[0], "="); ok && name == it.name {
				v = val
			} else if len(it.args) > 1 {
				v = it.args[1]
			}
			if ValidSessionID(v) {
				parent = v
			}
		}
	}
	if !fork {
		return ""
	}
	return parent
}

// ErrRemoteResume is why remote mode refuses a command line that continues
// a session it does not name (--continue, --resume without a session id)
// or forks one (--fork-session): headless, there is no picker, and the app
// shows one session per id.
var ErrRemoteResume = errors.New("with --remote, continue a session by its id: --resume <session id> (or --session <session id>), without --continue or --fork-session")

// RemoteResumeTarget is the session a command line resumes (--resume ID,
// -r ID, --resume=ID), for remote mode, which continues that session
// itself: "" when it resumes none; ErrRemoteResume when it continues or
// forks a session in a way remote mode cannot.
func RemoteResumeTarget(args []string) (string, error) {
	id, resumes := "", false
	for _, it := range splitArgs(args) {
		switch it.name {
		case "--fork-session", "--continue", "-c":
			return "", ErrRemoteResume
		case "--resume", "-r":
			resumes = true
			if name, val, ok := strings.Cut(it.args[0], "="); ok && name == it.name {
				id = val
			} else if len(it.args) > 1 {
				id = it.args[1]
			} else {
				id = ""
			}
		}
	}
	if resumes && !ValidSessionID(id) {
		return "", ErrRemoteResume
	}
	return id, nil
}

// ForkSessionArgs names the session a forking command line makes
// (--fork-session with --resume or --continue): the id the user gave with
// --session-id, else a new one, which is added to args (Claude Code names
// the fork's transcript after it). ccrelay then knows the fork before
// Claude says anything: Claude Code 2.1.197's SessionStart hook reports
// the resumed session, not the fork (followSessionStart). fork is "" for a
// command line that does not fork; args are returned as they were.
func ForkSessionArgs(args []string) (out []string, fork string) {
	forks, resumes := false, false
	for _, it := range splitArgs(args) {
		switch it.name {
		case "--fork-session":
			forks = true
		case "--resume", "-r", "--continue", "-c":
			resumes = true
		case "--session-id":
			v := ""
			if _, val, ok := strings.Cut(it.args[0], "="); ok {
				v = val
			} else if len(it.args) > 1 {
				v = it.args[1]
			}
			fork = v
		}
	}
	if !forks || !resumes {
		return args, ""
	}
	if fork != "" {
		return args, fork
	}
	fork = claude.NewSessionID()
	return append([]string{"--session-id=" + fork}, args...), fork
}
