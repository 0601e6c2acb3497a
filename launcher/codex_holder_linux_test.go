package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// holderOf reads /proc: a file a descendant of root holds open is
// holderOurs, one only a process outside root's tree holds is
// holderOther, one no process holds is holderNone; one only Codex's shared
// app server holds, or without a root, it does not say, even when the
// server is a child of root (the TUI that started it: it writes the
// threads of every TUI that connects to it, seen with 0.169.0).
func TestHolderOfProc(t *testing.T) {
	dir := t.TempDir()
	ours, theirs, nobody := filepath.Join(dir, "ours.jsonl"), filepath.Join(dir, "theirs.jsonl"), filepath.Join(dir, "nobody.jsonl")
	shared, sharedOurs := filepath.Join(dir, "shared.jsonl"), filepath.Join(dir, "shared-ours.jsonl")
	for _, p := range []string{ours, theirs, nobody, shared, sharedOurs} {
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := func(script string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sh", append([]string{"-c", script}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// The shell's input: a pipe no one writes to, for read to wait on.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		defer r.Close()
		cmd.Stdin = r
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
		return cmd
	}
	// This run's Codex: the file is held by a child of the process
	// started, as the codex binary under the node launcher holds it.
	// It also started the shared server, as the TUI does: a child of
	// root whose arguments hold app-server (the sleep under it does not
	// hold the file).
	root := start(`(exec 3<"$0"; exec sleep 300) & (exec 3<"$1"; exec sh -c 'sleep 300 3<&-; :' app-server) & wait`, ours, sharedOurs)
	start(`exec 3<"$0"; exec sleep 300`, theirs)
	// Codex's shared server: a process whose arguments hold app-server.
	start(`exec 3<"$0"; read x`, shared, "app-server")
	pid := root.Process.Pid
	deadline := time.Now().Add(30 * time.Second)
	held := func(p string) bool { return holderOf(p, pid) != holderNone }
	for !held(ours) || !held(theirs) || !held(shared) || !held(sharedOurs) {
		if time.Now().After(deadline) {
			t.Fatalf("ours held by %v, theirs by %v, shared by %v, the shared server started by root by %v",
				holderOf(ours, pid), holderOf(theirs, pid), holderOf(shared, pid), holderOf(sharedOurs, pid))
		}
		time.Sleep(20 * time.Millisecond) // the shells opening the files; bounded by the deadline
	}
	for _, c := range []struct {
		what, path string
		want       rolloutHolder
	}{{"ours", ours, holderOurs}, {"theirs", theirs, holderOther}, {"the shared server", shared, holderUnknown},
		{"the shared server started by root", sharedOurs, holderUnknown}} {
		if h := holderOf(c.path, pid); h != c.want {
			t.Errorf("a file held by %s: %v, want %v", c.what, h, c.want)
		}
	}
	if h := holderOf(nobody, pid); h != holderNone {
		t.Errorf("a file no process holds: %v", h)
	}
	if h := holderOf(ours, 0); h != holderUnknown {
		t.Errorf("no process started: %v", h)
	}
	if h := holderOf(filepath.Join(dir, "gone.jsonl"), pid); h != holderUnknown {
		t.Errorf("a file that is not there: %v", h)
	}
}
