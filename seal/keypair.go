package seal

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// b64 is the text form of every binary value: unpadded base64url, strict
// (unused trailing bits must be zero), so that each value has one text form.
var b64 = base64.RawURLEncoding.Strict()

const (
	// PublicKeySize is the size of an X25519 public key.
	PublicKeySize = 32
	// PrivateKeySize is the size of an X25519 private key; a key file of
	// exactly this size is of the older, raw form.
	PrivateKeySize = 32
	// FingerprintSize is how many bytes of a public key's SHA-256 its
	// fingerprint keeps: 128 bits, 22 characters of base64url.
	FingerprintSize = 16
	// MaxKeyFileBytes bounds what LoadKeyPair reads: a key file is about 80
	// bytes, anything much larger is not one.
	MaxKeyFileBytes = 4 << 10
	// keyFileHeader is the first line of a key file.
	keyFileHeader = "ccrelay-x25519-private-key-v1"
)

// ErrKeyFileMode is returned by LoadKeyPair for a key file that users other
// than its owner can read or write.
var ErrKeyFileMode = errors.New("seal: key file is readable by others")

// KeyPair is a machine's X25519 key pair.
type KeyPair struct {
	priv *ecdh.PrivateKey
}

// GenerateKeyPair makes a new key pair from the system's random source.
func GenerateKeyPair() (*KeyPair, error) {
	priv, err := ecdh.X25519().GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("seal: generate key pair: %w", err)
	}
	return &KeyPair{priv: priv}, nil
}

// NewKeyPair wraps an X25519 private key.
func NewKeyPair(priv *ecdh.PrivateKey) (*KeyPair, error) {
	if priv == nil || priv.Curve() != ecdh.X25519() {
		return nil, errors.New("seal: not an X25519 private key")
	}
	return &KeyPair{priv: priv}, nil
}

// Private is the private key, for ECDH and HPKE.
func (k *KeyPair) Private() *ecdh.PrivateKey { return k.priv }

// Public is the public key.
func (k *KeyPair) Public() *ecdh.PublicKey { return k.priv.PublicKey() }

// PublicString is the public key's text form (43 characters).
func (k *KeyPair) PublicString() string { return EncodePublicKey(k.Public()) }

// Fingerprint is the public key's fingerprint (see [Fingerprint]).
func (k *KeyPair) Fingerprint() string { return Fingerprint(k.Public()) }

// EncodePublicKey is the text form of an X25519 public key: its 32 bytes in
// base64url.
func EncodePublicKey(pub *ecdh.PublicKey) string { return b64.EncodeToString(pub.Bytes()) }

// ParsePublicKey reads the text form of an X25519 public key.
func ParsePublicKey(s string) (*ecdh.PublicKey, error) {
	if len(s) != b64.EncodedLen(PublicKeySize) {
		return nil, fmt.Errorf("seal: public key: %d characters, want %d", len(s), b64.EncodedLen(PublicKeySize))
	}
	raw, err := b64.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("seal: public key: %w", err)
	}
	pub, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("seal: public key: %w", err)
	}
	return pub, nil
}

// Fingerprint names a public key in a pairing link: the first 16 bytes of
// the SHA-256 of its 32 bytes, in base64url (22 characters). Whoever holds a
// fingerprint from a trusted channel (the QR code) can check a public key
// received through the relay.
func Fingerprint(pub *ecdh.PublicKey) string {
	sum := sha256.Sum256(pub.Bytes())
	return b64.EncodeToString(sum[:FingerprintSize])
}

// MatchFingerprint reports whether pub has the fingerprint fp.
func MatchFingerprint(pub *ecdh.PublicKey, fp string) bool {
	return fp == Fingerprint(pub)
}

// SaveKeyPair writes a new key file at path, readable and writable by its
// owner only (0600 whatever the umask). It never replaces an existing file:
// the file appears complete or not at all, and an existing one is an error
// wrapping fs.ErrExist.
func SaveKeyPair(path string, k *KeyPair) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".key-*") // created 0600
	if err != nil {
		return fmt.Errorf("seal: save key: %w", err)
	}
	defer os.Remove(tmp.Name())
	body := keyFileHeader + "\n" + b64.EncodeToString(k.priv.Bytes()) + "\n"
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("seal: save key: %w", err)
	}
	if _, err := tmp.WriteString(body); err != nil {
		tmp.Close()
		return fmt.Errorf("seal: save key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("seal: save key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("seal: save key: %w", err)
	}
	// A hard link publishes the complete file and fails if one exists.
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("seal: save key: %w", err)
	}
	return nil
}

// LoadKeyPair reads a key file written by SaveKeyPair, or one of the older
// form, the 32 private-key bytes alone. It refuses a file that others than
// its owner may read or write (ErrKeyFileMode), since the private key must
// not have leaked.
func LoadKeyPair(path string) (*KeyPair, error) {
	k, _, err := loadKeyPair(path)
	return k, err
}

// loadKeyPair is LoadKeyPair that also says whether the file was of the
// older, raw form.
func loadKeyPair(path string) (k *KeyPair, raw bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("seal: load key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("seal: load key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("seal: load key %s: not a regular file", path)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("%w: %s has mode %v, want 0600 (chmod 600 it if nobody else read it, or remove it to make a new key and pair again)",
			ErrKeyFileMode, path, st.Mode().Perm())
	}
	body, err := io.ReadAll(io.LimitReader(f, MaxKeyFileBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("seal: load key: %w", err)
	}
	k, err = parseKeyFile(body)
	if err != nil {
		return nil, false, fmt.Errorf("seal: load key %s: %w", path, err)
	}
	return k, len(body) == PrivateKeySize, nil
}

// parseKeyFile reads the contents of a key file.
func parseKeyFile(body []byte) (*KeyPair, error) {
	if len(body) > MaxKeyFileBytes {
		return nil, errors.New("not a key file: too large")
	}
	if len(body) == PrivateKeySize {
		// The older form: the private key's bytes alone. A file of the
		// documented form is never this short (its header alone is 30
		// bytes, its key line 44).
		priv, err := ecdh.X25519().NewPrivateKey(body)
		if err != nil {
			return nil, fmt.Errorf("private key: %w", err)
		}
		return &KeyPair{priv: priv}, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 || lines[0] != keyFileHeader {
		return nil, errors.New("not a ccrelay key file")
	}
	raw, err := b64.DecodeString(lines[1])
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	priv, err := ecdh.X25519().NewPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	return &KeyPair{priv: priv}, nil
}

// LoadOrCreateKeyPair loads the key file at path, or makes and saves a new
// key pair if there is none; created says which. A key file of the older,
// raw form is rewritten in the documented one (the same key), so that every
// key file reads as docs/security.md says.
func LoadOrCreateKeyPair(path string) (k *KeyPair, created bool, err error) {
	k, raw, err := loadKeyPair(path)
	if err == nil {
		if raw {
			if err := rewriteKeyFile(path, k); err != nil {
				return nil, false, err
			}
		}
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	k, err = GenerateKeyPair()
	if err != nil {
		return nil, false, err
	}
	if err := SaveKeyPair(path, k); err != nil {
		if errors.Is(err, fs.ErrExist) { // made at the same time by another process
			k, err = LoadKeyPair(path)
			return k, false, err
		}
		return nil, false, err
	}
	return k, true, nil
}

// rewriteKeyFile replaces the key file at path with k in the documented
// form, atomically: a reader at the same time finds the old file or the new
// one, each holding the same key.
func rewriteKeyFile(path string, k *KeyPair) error {
	tmp := filepath.Join(filepath.Dir(path), ".key-rewrite-"+b64.EncodeToString(randomBytes(6)))
	if err := SaveKeyPair(tmp, k); err != nil {
		return fmt.Errorf("seal: rewrite key file %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("seal: rewrite key file %s: %w", path, err)
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return b
}
