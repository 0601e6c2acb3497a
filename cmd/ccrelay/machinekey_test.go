package main

import (
	"bytes"
	"crypto/ecdh"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/seal"
)

// The machine key file is the documented two-line format: a new key is
// written so (and seal.LoadKeyPair reads it), a key of the older raw
// 32-byte form is read and rewritten so (the same key), and a file that
// group or others may read is refused, never used.
func TestMachineKeyFileFormat(t *testing.T) {
	t.Run("new key", func(t *testing.T) {
		dir := t.TempDir()
		k, err := machineKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, MachineKeyFile)
		b, _ := os.ReadFile(path)
		if !strings.HasPrefix(string(b), "ccrelay-x25519-private-key-v1\n") || strings.Count(string(b), "\n") != 2 {
			t.Fatalf("key file %q: not the two-line format", b)
		}
		kp, err := seal.LoadKeyPair(path)
		if err != nil || !kp.Private().Equal(k) {
			t.Fatalf("seal.LoadKeyPair: %v", err)
		}
	})
	t.Run("raw 32 bytes", func(t *testing.T) {
		dir := t.TempDir()
		old, _ := ecdh.X25519().GenerateKey(nil)
		path := filepath.Join(dir, MachineKeyFile)
		if err := os.WriteFile(path, old.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := machineKey(dir)
		if err != nil || !k.Equal(old) {
			t.Fatalf("raw key: %v (same key: %v)", err, k != nil && k.Equal(old))
		}
		b, _ := os.ReadFile(path)
		if bytes.Equal(b, old.Bytes()) || !strings.HasPrefix(string(b), "ccrelay-x25519-private-key-v1\n") {
			t.Fatalf("the raw key file was not rewritten in the documented format: %q", b)
		}
		if fi, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
			t.Fatalf("rewritten key file: %v %v", fi, err)
		}
		again, err := machineKey(dir)
		if err != nil || !again.Equal(old) {
			t.Fatalf("after the rewrite: %v", err)
		}
	})
	if runtime.GOOS == "windows" {
		return
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644} {
		for _, form := range []string{"raw", "text"} {
			t.Run(form+" "+mode.String(), func(t *testing.T) {
				dir := t.TempDir()
				k, _ := seal.GenerateKeyPair()
				path := filepath.Join(dir, MachineKeyFile)
				body := k.Private().Bytes()
				if form == "text" {
					if err := seal.SaveKeyPair(path, k); err != nil {
						t.Fatal(err)
					}
					body, _ = os.ReadFile(path)
				}
				if err := os.WriteFile(path, body, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
				got, err := machineKey(dir)
				if !errors.Is(err, seal.ErrKeyFileMode) || got != nil {
					t.Fatalf("a %v key file was used: %v", mode, err)
				}
				if !strings.Contains(err.Error(), "chmod 600") {
					t.Errorf("the refusal does not say what to do: %v", err)
				}
				if b, _ := os.ReadFile(path); !bytes.Equal(b, body) {
					t.Errorf("the refused file was changed")
				}
			})
		}
	}
}
