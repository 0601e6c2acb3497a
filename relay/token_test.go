package relay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	tok, err := LoadOrCreateToken(dir)
	if err != nil || len(tok) != 64 {
		t.Fatalf("token %q, %v", tok, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, TokenFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	again, _ := LoadOrCreateToken(dir)
	if again != tok {
		t.Fatal("token changed")
	}
	f, _ := os.OpenFile(filepath.Join(dir, TokenFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\nsecond-token-3f9c1a7e5b2d4086c0ffee\n")
	f.Close()
	all, err := LoadTokens(dir)
	if err != nil || len(all) != 2 || all[0] != tok || all[1] != "second-token-3f9c1a7e5b2d4086c0ffee" {
		t.Fatalf("tokens %v, %v", all, err)
	}
	if first, _ := LoadOrCreateToken(dir); first != tok {
		t.Fatal("first token changed")
	}
}

// A token file with a weak token (on any line) does not start a relay: the
// error says which line and why, and never quotes the token.
func TestTokenStrength(t *testing.T) {
	good := "0f1e2d3c4b5a69788796a5b4c3d2e1f0" // 32 hex digits
	for _, tc := range []struct {
		name, file string
		want       string // in the error; "" for none
	}{
		{"one character", "x\n", "1 characters"},
		{"31 hex digits", good[:31] + "\n", "31 characters"},
		{"repeated", strings.Repeat("ab", 20) + "\n", "2 different characters"},
		{"a space inside", good[:16] + " " + good[16:] + "\n", "space"},
		{"not ASCII", good + "é\n", "printable ASCII"},
		{"weak second line", good + "\nshort-one\n", "line 2"},
		{"32 hex digits", good + "\n", ""},
		{"two good lines", good + "\n" + strings.ToUpper(good) + "-x\n", ""},
		{"generated", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err1 := LoadOrCreateToken(dir)
			_, err2 := LoadTokens(dir)
			err := err1
			if err == nil {
				err = err2
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("a token file %q was taken", tc.file)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "openssl rand -hex 16") {
				t.Errorf("error %q, want it to say %q and how to make one", err, tc.want)
			}
			for _, l := range strings.Split(tc.file, "\n") {
				if len(l) > 2 && strings.Contains(err.Error(), l) {
					t.Errorf("error %q quotes the token", err)
				}
			}
		})
	}
}
