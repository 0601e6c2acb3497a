//go:build unix

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With CCRELAY_HEAP_PROFILE set, ccrelay writes a heap profile (gzipped,
// as go tool pprof reads it) at each SIGUSR1, numbered, and one as it
// exits.
func TestHeapProfileOnSignal(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "relay")
	cmd := exec.Command(binary, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), HeapProfileEnv+"="+prefix)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "app:") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	waitProfile := func(path string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			if b, err := os.ReadFile(path); err == nil {
				if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
					t.Fatalf("%s is not a gzipped profile: % x", path, b[:min(len(b), 8)])
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s", path)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, n := range []string{"1", "2"} {
		if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		waitProfile(prefix + "." + n + ".heap")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve ended with %v after SIGUSR1 and SIGTERM", err)
	}
	waitProfile(prefix + ".exit.heap")
}

// heapProfile asks p (started with HeapProfileEnv) for a heap profile and
// waits until it is written at path.
func heapProfile(b *testing.B, p *os.Process, path string) {
	b.Helper()
	if err := p.Signal(syscall.SIGUSR1); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no heap profile at %s a minute after SIGUSR1", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
