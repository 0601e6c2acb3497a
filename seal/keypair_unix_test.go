//go:build unix

package seal

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSaveKeyPairWhateverTheUmask: the key file is 0600 under a umask that
// would open it (0) and one that would close it too far (0277). The umask is
// the process's, so this test is not parallel.
func TestSaveKeyPairWhateverTheUmask(t *testing.T) {
	for _, mask := range []int{0, 0o022, 0o277} {
		old := syscall.Umask(mask)
		path := filepath.Join(t.TempDir(), "machine.key")
		err := SaveKeyPair(path, newKeyPair(t))
		syscall.Umask(old)
		if err != nil {
			t.Fatalf("umask %#o: %v", mask, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("umask %#o: key file mode %v, want 0600", mask, st.Mode().Perm())
		}
		if _, err := LoadKeyPair(path); err != nil {
			t.Errorf("umask %#o: %v", mask, err)
		}
	}
}
