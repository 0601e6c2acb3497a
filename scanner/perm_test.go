//go:build unix

package scanner

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary run permissionHelper instead of tests.
const helperEnv = "CCRELAY_SCANNER_PERM_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		permissionHelper(dir)
		return
	}
	os.Exit(m.Run())
}

// permissionHelper follows session s1 in dir for a few passes and prints the
// log and what was delivered.
func permissionHelper(dir string) {
	sink := &memSink{}
	sc, _ := New(Config{ProjectDir: dir, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(os.Stdout, nil))}, sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	sc.AddSession("s1")
	for range 10 {
		<-sc.Synced()
	}
	cancel()
	<-done
	os.Stdout.WriteString("delivered:" + strings.Join(sink.uuids(false), ",") + "\n")
}

// A transcript the user may not read: one clear log line, no crash, no
// records, and the scanner keeps going. As root (where permissions do not
// apply) the check runs in a child process as nobody.
func TestScannerPermissionDenied(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	main := filepath.Join(dir, "s1.jsonl")
	appendTo(t, main, userLine("u1", "secret"))
	if err := os.Chmod(main, 0o000); err != nil {
		t.Fatal(err)
	}
	self := os.Args[0]
	if os.Geteuid() == 0 {
		// nobody must be able to run the test binary: copy it out of the
		// private build folder.
		bin := filepath.Join(t.TempDir(), "scanner.test")
		data, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		self = bin
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	if os.Geteuid() == 0 {
		// The temp folders above dir must be reachable by nobody.
		for _, d := range append(parents(dir), parents(self)...) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				os.Chmod(d, fi.Mode().Perm()|0o011)
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	got := out.String()
	if strings.Count(got, "cannot read transcript") != 1 || !strings.Contains(got, "permission denied") {
		t.Fatalf("want one clear log line about permission:\n%s", got)
	}
	if !strings.Contains(got, "delivered:\n") {
		t.Fatalf("delivered records it could not read:\n%s", got)
	}
}

func parents(p string) []string {
	var out []string
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		out = append(out, d)
	}
	return out
}
