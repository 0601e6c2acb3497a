package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// StatusLine puts ccrelay's state (relay connected, what is unsent, a
// refused token) in Claude Code's status line, after the user's own.
type StatusLine struct {
	// Command is the argv of ccrelay's status line command (ccrelay
	// statusline); --status and --user are added.
	Command []string
	// StatusFile is where ccrelay keeps its state (WriteStatus).
	StatusFile string
}

// UserStatusLineFile is the name, in the run's hook folder, of the file
// that holds the user's own status line setting for ccrelay's to run.
const UserStatusLineFile = "user-statusline.json"

// RelayStatus is what ccrelay's status line shows.
type RelayStatus struct {
	Connected bool  `json:"connected"`
	Unsent    int64 `json:"unsent"`  // bytes not acknowledged by the relay
	Refused   bool  `json:"refused"` // the relay refused the credential
	// Polled: Claude's transcripts cannot be watched (a limit of the
	// kernel's): the scanner polls them meanwhile.
	Polled bool `json:"polled,omitempty"`
}

// WriteStatus replaces the status file with st (write, then rename: a
// reader sees the old state or the new one).
func WriteStatus(path string, st RelayStatus) error {
	b, _ := json.Marshal(st)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write status %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write status %s: %w", path, err)
	}
	return nil
}

// userStatusLine is the status line the user set: in their --settings, or
// else in Claude Code's settings files, the most specific first (the
// project's local settings, the project's, the user's). nil: none.
func userStatusLine(flag map[string]any, dir string, env []string) any {
	if sl, ok := flag["statusLine"]; ok && sl != nil {
		return sl
	}
	var files []string
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if dir != "" {
		files = append(files, filepath.Join(dir, ".claude", "settings.local.json"), filepath.Join(dir, ".claude", "settings.json"))
	}
	if config := claudeConfigDir(env); config != "" {
		files = append(files, filepath.Join(config, "settings.json"))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) > maxSettingsFile {
			continue
		}
		var s struct {
			StatusLine any `json:"statusLine"`
		}
		if json.Unmarshal(b, &s) == nil && s.StatusLine != nil {
			return s.StatusLine
		}
	}
	return nil
}

// maxSettingsFile bounds what is read of a settings file for the user's
// status line.
const maxSettingsFile = 1 << 20

// claudeConfigDir is the folder of Claude Code's user settings for env
// (nil: this process's): $CLAUDE_CONFIG_DIR, else ~/.claude.
func claudeConfigDir(env []string) string {
	if env == nil {
		env = os.Environ()
	}
	home := ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CLAUDE_CONFIG_DIR":
			if v != "" {
				return v
			}
		case "HOME", "USERPROFILE":
			if home == "" {
				home = v
			}
		}
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".claude")
}

// addStatusLine makes ccrelay's status line command Claude's: the user's
// own (user, from userStatusLine) is kept in dir for it to run first.
func addStatusLine(settings map[string]any, dir string, sl StatusLine, user any, goos string) error {
	if goos == "windows" || len(sl.Command) == 0 {
		// Claude Code runs a status line through a shell only; which one
		// (Git Bash, PowerShell) is the machine's, and they quote
		// differently: the user's status line is left as it is.
		return nil
	}
	if user == nil {
		user = map[string]any{}
	}
	obj, ok := user.(map[string]any)
	if !ok {
		return errors.New("--settings: statusLine is not an object")
	}
	b, _ := json.Marshal(obj)
	userFile := filepath.Join(dir, UserStatusLineFile)
	if err := writePrivate(userFile, b); err != nil {
		return err
	}
	argv := append(append([]string(nil), sl.Command...), "--status", sl.StatusFile, "--user", userFile)
	entry := hookEntry(goos, argv)
	if p, ok := obj["padding"]; ok {
		entry["padding"] = p
	}
	settings["statusLine"] = entry
	return nil
}
