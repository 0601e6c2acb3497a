//go:build unix

package relay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs f with the process's umask set to mask.
func withUmask(mask int, f func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// useDataDir does what `ccrelay serve` does with its data folder: secure
// it, make the token, open the database and write to it (which makes the
// -wal and -shm files, which exist while it is open).
func useDataDir(t *testing.T, dir string) []string {
	t.Helper()
	notes, err := SecureDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(dir); err != nil {
		t.Fatal(err)
	}
	st := openTestStore(t, filepath.Join(dir, StoreFile))
	if _, err := st.Append(context.Background(), "s", []Item{{ID: "a", Body: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	return notes
}

// Everything in the data folder is private whatever the umask, and an
// existing folder open to others is made private with a note.
func TestDataDirModes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(dir string) // before the relay uses it
		notes   []string         // what the notes mention
	}{
		{"new folder", func(string) {}, nil},
		{"existing 0755 folder", func(dir string) { os.Mkdir(dir, 0o755); os.Chmod(dir, 0o755) }, []string{"was mode -rwxr-xr-x"}},
		{"existing 0777 folder with 0644 files", func(dir string) {
			os.Mkdir(dir, 0o777)
			os.Chmod(dir, 0o777)
			for _, f := range []string{TokenFile, StoreFile} {
				if f == TokenFile {
					os.WriteFile(filepath.Join(dir, f), []byte("old-token-5e0d8c1b9a27f364c0ffee\n"), 0o644)
				} else {
					os.WriteFile(filepath.Join(dir, f), nil, 0o644)
				}
			}
		}, []string{"was mode -rwxrwxrwx", TokenFile + " was mode -rw-r--r--", StoreFile + " was mode -rw-r--r--"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			var notes []string
			withUmask(0, func() {
				tc.prepare(dir)
				notes = useDataDir(t, dir)
			})
			if got := mode(t, dir); got != 0o700 {
				t.Errorf("data folder mode %v", got)
			}
			for _, f := range []string{TokenFile, StoreFile, StoreFile + "-wal", StoreFile + "-shm"} {
				if got := mode(t, filepath.Join(dir, f)); got != 0o600 {
					t.Errorf("%s mode %v", f, got)
				}
			}
			all := strings.Join(notes, "\n")
			for _, want := range tc.notes {
				if !strings.Contains(all, want) {
					t.Errorf("notes lack %q:\n%s", want, all)
				}
			}
			if len(notes) != len(tc.notes) {
				t.Errorf("notes:\n%s", all)
			}
		})
	}
}

// A shared folder (sticky, like /tmp) is refused, not changed.
func TestDataDirSharedRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := SecureDataDir(dir); err == nil || !strings.Contains(err.Error(), "--data") {
		t.Fatalf("err %v", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Fatalf("shared folder changed: %v", fi.Mode())
	}
}
