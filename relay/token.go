package relay

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccrelay/ccrelay/internal/durable"
)

// TokenFile is the name of the token file in the relay's data folder.
const TokenFile = "token"

// StoreFile is the name of the database in the relay's data folder.
const StoreFile = "relay.db"

// SecureDataDir makes the relay's data folder private before anything is
// stored in it: created mode 0700 if missing (whatever the umask); if it
// exists and others may read, write or enter it, it is made 0700, and the
// token and database files in it that others may read are made 0600. It
// returns a note for each change, for the caller to warn with. A folder
// that cannot be made private (one with the sticky bit, shared like /tmp,
// or one this user may not change) is refused with an error.
func SecureDataDir(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create data folder: %w", err)
		}
		return nil, os.Chmod(dir, 0o700)
	}
	if err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data folder %s is not a folder", dir)
	}
	var notes []string
	if mode := fi.Mode(); mode.Perm()&0o077 != 0 {
		if mode&os.ModeSticky != 0 {
			return nil, fmt.Errorf("data folder %s (mode %v) is shared with other users; choose a folder of your own with --data", dir, mode.Perm())
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data folder %s (mode %v) is open to other users and cannot be made private: %w", dir, mode.Perm(), err)
		}
		notes = append(notes, fmt.Sprintf("data folder %s was mode %v, open to other users: now 0700", dir, mode.Perm()))
	}
	for _, name := range []string{TokenFile, StoreFile, StoreFile + "-wal", StoreFile + "-shm"} {
		path := filepath.Join(dir, name)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(path, 0o600); err != nil {
			return notes, fmt.Errorf("make %s private: %w", path, err)
		}
		notes = append(notes, fmt.Sprintf("%s was mode %v, readable by other users: now 0600", path, fi.Mode().Perm()))
	}
	return notes, nil
}

// LoadOrCreateToken returns the token stored in dir, creating a fresh random
// one (file mode 0600) on first start.
func LoadOrCreateToken(dir string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	b, err := os.ReadFile(path)
	if err == nil {
		tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		tok = strings.TrimSpace(tok)
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty; delete it to make a new token", path)
		}
		if err := CheckToken(tok); err != nil {
			return "", fmt.Errorf("token file %s, line 1: %w", path, err)
		}
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read token: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create data folder: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make token: %w", err)
	}
	tok := hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	// The token is handed out (printed, saved by CLIs) once this returns:
	// it must survive power loss.
	if err := durable.SyncFile(path, f); err != nil {
		f.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, f.Close()
}

// LoadTokens returns every token in dir's token file, one per line (the
// first is the one LoadOrCreateToken returns). Each token sees only the
// sessions its CLIs created; add a line to give someone a relay of their own
// on the same server.
func LoadTokens(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	var out []string
	for i, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		if err := CheckToken(t); err != nil {
			return nil, fmt.Errorf("token file %s, line %d: %w", filepath.Join(dir, TokenFile), i+1, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// MinTokenChars is the length of the shortest token a relay takes: 16
// random bytes (128 bits) written in hex, as `openssl rand -hex 16` makes
// them. The relay makes 32 random bytes (64 hex digits) itself.
const MinTokenChars = 32

// minTokenDistinct is the fewest different characters a token may have:
// a random token of 32 hex digits has about 15, so fewer shows a pattern
// ("aaaa…", "abab…") that no length makes hard to guess.
const minTokenDistinct = 8

// CheckToken refuses a relay token too weak to guard the relay: shorter
// than MinTokenChars, made of fewer than minTokenDistinct different
// characters, or holding anything but printable ASCII (a space, a control
// character or another alphabet cannot travel in the header that carries
// it). The error never quotes the token.
func CheckToken(tok string) error {
	const how = "make one with: openssl rand -hex 16 (or delete the token file, and the relay makes a new one)"
	seen := map[rune]bool{}
	for _, r := range tok {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("the token holds a space, a control character or a character outside printable ASCII: %s", how)
		}
		seen[r] = true
	}
	if n := len(tok); n < MinTokenChars {
		return fmt.Errorf("the token is %d characters, fewer than the %d a relay token needs (16 random bytes in hex): %s", n, MinTokenChars, how)
	}
	if len(seen) < minTokenDistinct {
		return fmt.Errorf("the token is made of only %d different characters, a pattern anyone can guess: %s", len(seen), how)
	}
	return nil
}
