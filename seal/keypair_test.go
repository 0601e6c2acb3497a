package seal

import (
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func newKeyPair(t testing.TB) *KeyPair {
	t.Helper()
	k, err := GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyPairSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "machine.key")
	k := newKeyPair(t)
	if err := SaveKeyPair(path, k); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	got, err := LoadKeyPair(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Private().Equal(k.Private()) || got.PublicString() != k.PublicString() {
		t.Fatal("loaded key differs from the saved one")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("save left %d files, want only the key", len(ents))
	}
}

func TestSaveKeyPairNeverReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "machine.key")
	first, second := newKeyPair(t), newKeyPair(t)
	if err := SaveKeyPair(path, first); err != nil {
		t.Fatal(err)
	}
	if err := SaveKeyPair(path, second); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second save: %v, want fs.ErrExist", err)
	}
	got, err := LoadKeyPair(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Private().Equal(first.Private()) {
		t.Fatal("the second save replaced the first key")
	}
}

func TestLoadKeyPairRefusesOpenModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o700, true},
		{0o640, false}, {0o604, false}, {0o644, false}, {0o660, false}, {0o606, false}, {0o620, false}, {0o602, false},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "machine.key")
			if err := SaveKeyPair(path, newKeyPair(t)); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			_, err := LoadKeyPair(path)
			if c.ok && err != nil {
				t.Fatalf("mode %v refused: %v", c.mode, err)
			}
			if !c.ok && !errors.Is(err, ErrKeyFileMode) {
				t.Fatalf("mode %v: %v, want ErrKeyFileMode", c.mode, err)
			}
		})
	}
}

func TestLoadKeyPairRefusesGarbage(t *testing.T) {
	k := newKeyPair(t)
	good := keyFileHeader + "\n" + b64.EncodeToString(k.Private().Bytes()) + "\n"
	for name, body := range map[string]string{
		"empty":          "",
		"no header":      b64.EncodeToString(k.Private().Bytes()) + "\n",
		"other header":   "ccrelay-x25519-private-key-v2\n" + b64.EncodeToString(k.Private().Bytes()) + "\n",
		"short key":      keyFileHeader + "\n" + b64.EncodeToString(make([]byte, 31)) + "\n",
		"long key":       keyFileHeader + "\n" + b64.EncodeToString(make([]byte, 33)) + "\n",
		"not base64":     keyFileHeader + "\n" + strings.Repeat("!", 43) + "\n",
		"extra line":     good + "more\n",
		"huge":           good + strings.Repeat("x", MaxKeyFileBytes),
		"padded base64":  keyFileHeader + "\n" + b64.EncodeToString(k.Private().Bytes()) + "=\n",
		"public instead": keyFileHeader + "\n" + k.PublicString() + "x\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "machine.key")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadKeyPair(path); err == nil {
				t.Fatal("loaded")
			}
		})
	}
	path := filepath.Join(t.TempDir(), "machine.key")
	os.WriteFile(path, []byte(good), 0o600)
	if _, err := LoadKeyPair(path); err != nil {
		t.Fatalf("the well-formed file: %v", err)
	}
	if _, err := LoadKeyPair(t.TempDir()); err == nil {
		t.Fatal("loaded a folder")
	}
}

func TestLoadOrCreateKeyPair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "machine.key")
	k, created, err := LoadOrCreateKeyPair(path)
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v", created, err)
	}
	again, created, err := LoadOrCreateKeyPair(path)
	if err != nil || created {
		t.Fatalf("second call: created=%v err=%v", created, err)
	}
	if !again.Private().Equal(k.Private()) {
		t.Fatal("second call made another key")
	}
	if runtime.GOOS != "windows" {
		os.Chmod(path, 0o644)
		if _, _, err := LoadOrCreateKeyPair(path); !errors.Is(err, ErrKeyFileMode) {
			t.Fatalf("a readable key file: %v, want ErrKeyFileMode (and no new key)", err)
		}
	}
}

func TestFingerprint(t *testing.T) {
	raw, _ := hex.DecodeString("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a") // RFC 7748 6.1, Alice's public key
	pub, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	want := b64.EncodeToString(sum[:16])
	if got := Fingerprint(pub); got != want || len(got) != 22 {
		t.Fatalf("Fingerprint = %q, want %q (22 characters)", got, want)
	}
	if !MatchFingerprint(pub, want) {
		t.Fatal("MatchFingerprint refuses the key's own fingerprint")
	}
	other := newKeyPair(t)
	if MatchFingerprint(other.Public(), want) || other.Fingerprint() == want {
		t.Fatal("another key matches the fingerprint")
	}
}

func TestParsePublicKey(t *testing.T) {
	k := newKeyPair(t)
	got, err := ParsePublicKey(k.PublicString())
	if err != nil || !got.Equal(k.Public()) {
		t.Fatalf("round trip: %v", err)
	}
	if len(k.PublicString()) != 43 {
		t.Errorf("public key text of %d characters, want 43", len(k.PublicString()))
	}
	for _, s := range []string{"", "abc", k.PublicString() + "A", k.PublicString()[:42], strings.Repeat("!", 43), k.PublicString() + "=",
		strings.Repeat("0", 42) + "1", // non-canonical: the unused low bits of the last character are set
	} {
		if _, err := ParsePublicKey(s); err == nil {
			t.Errorf("parsed %q", s)
		}
	}
}

// A key file of the older form (the 32 private-key bytes alone) is read,
// and LoadOrCreateKeyPair rewrites it in the documented form with the same
// key; a raw file that others may read is refused like any key file.
func TestLoadKeyPairRawForm(t *testing.T) {
	k := newKeyPair(t)
	path := filepath.Join(t.TempDir(), "machine.key")
	if err := os.WriteFile(path, k.Private().Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadKeyPair(path)
	if err != nil || !got.Private().Equal(k.Private()) {
		t.Fatalf("raw key: %v", err)
	}
	if b, _ := os.ReadFile(path); len(b) != PrivateKeySize {
		t.Fatal("LoadKeyPair changed the file")
	}
	got, created, err := LoadOrCreateKeyPair(path)
	if err != nil || created || !got.Private().Equal(k.Private()) {
		t.Fatalf("LoadOrCreateKeyPair: created=%v err=%v", created, err)
	}
	want := keyFileHeader + "\n" + b64.EncodeToString(k.Private().Bytes()) + "\n"
	if b, _ := os.ReadFile(path); string(b) != want {
		t.Fatalf("rewritten as %q, want %q", b, want)
	}
	if st, _ := os.Stat(path); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Fatalf("rewritten with mode %v", st.Mode().Perm())
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("left files behind: %v", entries)
	}
	if runtime.GOOS != "windows" {
		os.WriteFile(path, k.Private().Bytes(), 0o600)
		os.Chmod(path, 0o644)
		if _, _, err := LoadOrCreateKeyPair(path); !errors.Is(err, ErrKeyFileMode) {
			t.Fatalf("a readable raw key file: %v, want ErrKeyFileMode", err)
		}
	}
}
