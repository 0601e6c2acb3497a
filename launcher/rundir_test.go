package launcher

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Many claims at once in one folder: every claimant gets a slot of its own;
// a released slot is taken again; leftovers are the slots no one holds, and
// never slot 0 or a held one.
func TestClaimRunDirContention(t *testing.T) {
	base := filepath.Join(t.TempDir(), "state")
	const n = 16
	dirs := make([]*RunDir, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dirs[i], errs[i] = ClaimRunDir(base) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[dirs[i].Path] {
			t.Fatalf("slot %s claimed twice", dirs[i].Path)
		}
		seen[dirs[i].Path] = true
	}
	if !seen[base] {
		t.Fatalf("no one got the first slot: %v", seen)
	}
	// Three end: the next claim takes the lowest free slot.
	var first *RunDir
	for _, d := range dirs {
		if d.Path == base {
			first = d
		}
	}
	first.Release()
	again, err := ClaimRunDir(base)
	if err != nil || again.Path != base {
		t.Fatalf("claim after release: %v, %v", again, err)
	}
	ended := 0
	for _, d := range dirs {
		if d != first && ended < 2 {
			os.WriteFile(filepath.Join(d.Path, "mark"), []byte("x"), 0o600)
			d.Release()
			ended++
			defer func(p string) {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("ended slot %s not removed", p)
				}
			}(d.Path)
		}
	}
	var taken []string
	n2, err := again.Leftovers(func(dir string) error {
		if _, err := os.Stat(filepath.Join(dir, "mark")); err != nil {
			t.Errorf("leftover %s is not an ended slot", dir)
		}
		taken = append(taken, dir)
		return nil
	})
	if err != nil || n2 != 2 || len(taken) != 2 {
		t.Fatalf("leftovers %d %v, %v", n2, taken, err)
	}
	// Held slots are still there.
	for _, d := range dirs {
		if d.lock != nil {
			if _, err := os.Stat(filepath.Join(d.Path, lockName)); err != nil {
				t.Fatalf("held slot %s removed", d.Path)
			}
			d.Release()
		}
	}
	again.Release()
}

// Claims bounded by MaxRunSlots: one more is refused with a message.
func TestClaimRunDirLimit(t *testing.T) {
	base := t.TempDir()
	for range MaxRunSlots {
		d, err := ClaimRunDir(base)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Release()
	}
	if _, err := ClaimRunDir(base); err == nil {
		t.Fatalf("claim %d succeeded", MaxRunSlots+1)
	}
}
