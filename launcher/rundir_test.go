package launcher

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// slotHelperEnv makes the test binary a ccrelay that claims a slot of the
// folder it names, writes its hook folder there, and runs until killed.
const slotHelperEnv = "CCRELAY_LAUNCHER_SLOT_HELPER"

// A ccrelay killed before its cleanup leaves its hook folder in its slot:
// the next claim of that slot removes it, and never the hook folder of a
// ccrelay that runs (in another slot), nor other files of the slot.
func TestClaimRunDirRemovesStaleHookDirs(t *testing.T) {
	if base := os.Getenv(slotHelperEnv); base != "" {
		r, err := ClaimRunDir(base)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		settings, _, err := writeSettings(r.Path, []string{"ccrelay", "hook"}, &hookServer{url: "http://127.0.0.1:1/hook/session-start", token: "t"})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(filepath.Dir(settings))
		io.Copy(io.Discard, os.Stdin) // until killed
		os.Exit(0)
	}
	base := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimRunDirRemovesStaleHookDirs$")
	cmd.Env = append(os.Environ(), slotHelperEnv+"="+base)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the helper said %q: %v", line, err)
	}
	stale := strings.TrimSpace(line)
	if filepath.Dir(stale) != base || !strings.HasPrefix(filepath.Base(stale), hookDirPrefix) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the helper's hook folder is %q, not one in slot 0 of %s", stale, base)
	}
	// A ccrelay that runs meanwhile, in the next slot, with its hook folder.
	live, err := ClaimRunDir(base)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	liveSettings, cleanup, err := writeSettings(live.Path, []string{"ccrelay", "hook"}, &hookServer{url: "http://127.0.0.1:1/hook/session-start", token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	os.WriteFile(filepath.Join(base, "cursor.json"), []byte("{}"), 0o600)

	// The first is killed: no cleanup ran.
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed run's hook folder is not there to remove: %v", err)
	}
	next, err := ClaimRunDir(base)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release()
	if next.Path != base {
		t.Fatalf("the next run claimed %s, not the killed run's slot %s", next.Path, base)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed run's hook folder %s is still there (%v)", stale, err)
	}
	if next.StaleHookDirs != 1 || next.StaleErr != nil {
		t.Fatalf("the claim says %d stale hook folders removed, %v", next.StaleHookDirs, next.StaleErr)
	}
	if _, err := os.Stat(liveSettings); err != nil {
		t.Fatalf("the running ccrelay's hook folder was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "cursor.json")); err != nil {
		t.Fatalf("the slot's cursor was removed: %v", err)
	}
}
