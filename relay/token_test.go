package relay

import (
	"os"
	"path/filepath"
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
	f.WriteString("\nsecond-token\n")
	f.Close()
	all, err := LoadTokens(dir)
	if err != nil || len(all) != 2 || all[0] != tok || all[1] != "second-token" {
		t.Fatalf("tokens %v, %v", all, err)
	}
	if first, _ := LoadOrCreateToken(dir); first != tok {
		t.Fatal("first token changed")
	}
}
