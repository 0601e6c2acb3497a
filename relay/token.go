package relay

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the name of the token file in the relay's data folder.
const TokenFile = "token"

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
	for _, l := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(l); t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}
