package claude

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"unicode/utf16"

	"github.com/ccrelay/ccrelay/internal/dirs"
)

// maxEscapedLen is the longest project directory name Claude Code writes
// as is; longer names are cut and given a hash suffix.
const maxEscapedLen = 200

// EscapeProjectPath turns an absolute working directory into the name of
// its folder under <config>/projects, exactly as Claude Code does: every
// UTF-16 code unit outside [A-Za-z0-9] becomes "-" (no collapsing). Names
// longer than 200 characters keep their first 200 and get "-" plus the
// base36 absolute value of the Java string hash of the original path.
func EscapeProjectPath(path string) string {
	units := utf16.Encode([]rune(path))
	out := make([]byte, len(units))
	for i, u := range units {
		if u < 128 && isAlnum(byte(u)) {
			out[i] = byte(u)
		} else {
			out[i] = '-'
		}
	}
	if len(out) <= maxEscapedLen {
		return string(out)
	}
	abs := int64(javaHash(units))
	if abs < 0 {
		abs = -abs
	}
	return string(out[:maxEscapedLen]) + "-" + strconv.FormatInt(abs, 36)
}

// javaHash is Java's String.hashCode over UTF-16 code units (int32 wrap).
func javaHash(units []uint16) int32 {
	var h int32
	for _, u := range units {
		h = 31*h + int32(u)
	}
	return h
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// ConfigDir is Claude Code's configuration directory: $CLAUDE_CONFIG_DIR
// when set and non-empty (used as given, not resolved), else ~/.claude
// (%USERPROFILE%\.claude on Windows; dirs.Claude has the rule for every
// platform).
// getenv is usually os.Getenv; home is the user's home directory.
func ConfigDir(getenv func(string) string, home string) string {
	return dirs.Claude(dirs.Env{GOOS: runtime.GOOS, Getenv: getenv, Home: home})
}

// ProjectDir is the folder holding the transcripts of sessions started in
// cwd. A relative cwd is resolved against the process working directory; an
// empty one means the process working directory.
func ProjectDir(configDir, cwd string) (string, error) {
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", fmt.Errorf("resolve working directory %q: %w", cwd, err)
	}
	return filepath.Join(configDir, "projects", EscapeProjectPath(abs)), nil
}

// TranscriptPath is the main transcript file of a session.
func TranscriptPath(projectDir, sessionID string) string {
	return filepath.Join(projectDir, sessionID+".jsonl")
}

// SubagentDir is the folder where Claude Code writes the transcripts of a
// session's subagents (agent-<agentId>.jsonl, with .meta.json beside them).
func SubagentDir(projectDir, sessionID string) string {
	return filepath.Join(projectDir, sessionID, "subagents")
}

// SubagentFiles lists the subagent transcripts of the session whose main
// transcript is mainPath, including those nested below subagents/ (e.g.
// workflows), in lexical order. A missing folder yields none.
func SubagentFiles(mainPath string) ([]string, error) {
	dir := filepath.Join(mainPath[:len(mainPath)-len(filepath.Ext(mainPath))], "subagents")
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		if !d.IsDir() && filepath.Ext(p) == ".jsonl" {
			if m, _ := filepath.Match("agent-*.jsonl", d.Name()); m {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("list subagent transcripts of %s: %w", mainPath, err)
	}
	return files, nil
}

// NewSessionID returns a fresh session id in Claude Code's form (a random
// version 4 UUID), for sessions ccrelay creates with --session-id.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
