package durable

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The steps happen in the order that makes a replace survive power loss:
// the new content is fsynced before the rename makes it visible, and the
// folder is fsynced after the rename. A failure at any step before the
// rename leaves the old content and no temporary file.
//
// A power-loss test proper (a device-mapper target that drops unsynced
// writes) needs root and a loop device; this test instead watches each
// fsync through Hooks and checks what the file system shows at that
// moment, which is what such a test would depend on.
func TestReplaceOrderAndFailures(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name               string
		syncErr, syncDirEr error
		wantContent        string
		wantFile           bool // a file is returned
	}{
		{name: "ok", wantContent: "new", wantFile: true},
		{name: "file fsync fails", syncErr: boom, wantContent: "old"},
		{name: "folder fsync fails", syncDirEr: boom, wantContent: "new", wantFile: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			var steps []string
			defer SetHooks(Hooks{
				Sync: func(p string, f File) error {
					// Before the rename: the target still holds the old content.
					if b, _ := os.ReadFile(path); string(b) != "old" || p != path+".tmp" {
						t.Errorf("fsync of %s while the target holds %q", p, b)
					}
					steps = append(steps, "sync")
					if tc.syncErr != nil {
						return tc.syncErr
					}
					return f.Sync()
				},
				SyncDir: func(d string) error {
					if b, _ := os.ReadFile(path); string(b) != "new" || d != dir {
						t.Errorf("folder fsync of %s while the target holds %q", d, b)
					}
					steps = append(steps, "syncdir")
					return tc.syncDirEr
				},
			})()
			open := func(p string) (*os.File, error) { return os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600) }
			f, err := Replace(path, open, func(f *os.File) error { _, err := f.WriteAt([]byte("new"), 0); return err })
			if (err != nil) != (tc.syncErr != nil || tc.syncDirEr != nil) {
				t.Fatalf("err %v", err)
			}
			if (f != nil) != tc.wantFile {
				t.Fatalf("file %v", f)
			}
			if f != nil {
				f.Close()
			}
			if b, _ := os.ReadFile(path); string(b) != tc.wantContent {
				t.Fatalf("content %q, want %q", b, tc.wantContent)
			}
			if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temporary file left: %v", err)
			}
			want := []string{"sync", "syncdir"}
			if tc.syncErr != nil {
				want = want[:1]
			}
			if len(steps) != len(want) || steps[0] != want[0] || (len(want) > 1 && steps[1] != want[1]) {
				t.Fatalf("steps %v, want %v", steps, want)
			}
		})
	}
}

// WriteFile makes the file with the mode asked for, whatever the umask or
// a leftover temporary file's mode, and a crash's leftover is emptied.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor")
	if err := os.WriteFile(path+".tmp", []byte("a longer leftover of a crash"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "v1" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("content %q mode %v", b, fi.Mode().Perm())
	}
}

func TestPublishNeverReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	if err := Publish(p, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Publish(p, []byte("second"), 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second publish: %v", err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "first" || fi.Mode().Perm()&0o077 != 0 && runtime.GOOS != "windows" {
		t.Fatalf("%q, mode %v", b, fi.Mode())
	}
	if es, _ := os.ReadDir(filepath.Dir(p)); len(es) != 1 {
		t.Fatalf("left behind: %v", es)
	}
}
