// Package dirs says where ccrelay keeps its files on each platform: the
// state folder of a CLI (cursors, outbox, log, the hook's private folder),
// the data folder of a relay (SQLite store, token), and Claude Code's own
// folder. The rules are pure
// functions of the platform, the environment and the home folder, so that
// every platform's are tested on any.
//
//	          state                               data
//	linux,    $XDG_STATE_HOME/ccrelay             $XDG_DATA_HOME/ccrelay
//	macOS     ~/.local/state/ccrelay              ~/.local/share/ccrelay
//	windows   %LocalAppData%\ccrelay\state        %LocalAppData%\ccrelay\data
//
// On Windows %LocalAppData% is the machine's own part of the profile (not
// roamed to other machines), and <home>\AppData\Local when it is not set.
package dirs

import (
	"errors"
	"os"
	"runtime"
	"strings"
)

// App is the folder name ccrelay's files live under.
const App = "ccrelay"

// Env is what the rules read: the platform (GOOS), the environment and the
// user's home folder.
type Env struct {
	GOOS   string
	Getenv func(string) string
	Home   string // "" when unknown
}

// Current is this process's Env (home from os.UserHomeDir, "" when it has
// none).
func Current(home string) Env {
	return Env{GOOS: runtime.GOOS, Getenv: os.Getenv, Home: home}
}

// ErrNoHome is returned when a folder would be under a home folder that is
// not known.
var ErrNoHome = errors.New("no home folder (set HOME, or give the folder)")

// State is the state folder of a CLI.
func State(e Env) (string, error) {
	if e.GOOS == "windows" {
		return e.localAppData("state")
	}
	return e.xdg("XDG_STATE_HOME", ".local/state")
}

// Data is the data folder of a relay.
func Data(e Env) (string, error) {
	if e.GOOS == "windows" {
		return e.localAppData("data")
	}
	return e.xdg("XDG_DATA_HOME", ".local/share")
}

func (e Env) xdg(name, fallback string) (string, error) {
	if d := e.Getenv(name); d != "" {
		return Join(e.GOOS, d, App), nil
	}
	if e.Home == "" {
		return "", ErrNoHome
	}
	return Join(e.GOOS, e.Home, fallback, App), nil
}

func (e Env) localAppData(sub string) (string, error) {
	base := e.Getenv("LocalAppData") // Windows' environment is case-insensitive
	if base == "" {
		if e.Home == "" {
			return "", ErrNoHome
		}
		base = Join(e.GOOS, e.Home, "AppData", "Local")
	}
	return Join(e.GOOS, base, App, sub), nil
}

// Claude is Claude Code's own folder (settings, transcripts under
// projects/): $CLAUDE_CONFIG_DIR when set and not empty (as given, not
// resolved), else .claude in the home folder: %USERPROFILE%\.claude on
// Windows, where the home folder is the profile.
func Claude(e Env) string {
	if d := e.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	return Join(e.GOOS, e.Home, ".claude")
}

// Join joins path elements with goos's separator ("/" in elements is a
// separator too), as filepath.Join does on that platform for these simple
// cases (no "." or ".." elements).
func Join(goos string, elem ...string) string {
	sep := "/"
	if goos == "windows" {
		sep = `\`
	}
	var parts []string
	for i, el := range elem {
		if goos == "windows" {
			el = strings.ReplaceAll(el, "/", `\`)
		}
		if i > 0 {
			el = strings.TrimLeft(el, sep)
		}
		if i < len(elem)-1 {
			el = strings.TrimRight(el, sep)
		}
		if el != "" {
			parts = append(parts, el)
		}
	}
	return strings.Join(parts, sep)
}
