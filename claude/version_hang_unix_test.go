//go:build unix

package claude

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A --version that hangs, and leaves a child holding its output open when
// it is killed at VersionTimeout (a launcher whose binary hangs), is given
// up at VersionTimeout, not when the last holder of its output exits: the
// start of ccrelay waited for that.
func TestInstalledVersionHungChild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hangs")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nsleep 25 &\nsleep 25\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := InstalledVersion(context.Background(), bin)
	took := time.Since(start)
	t.Logf("gave up after %v (VersionTimeout %v)", took, VersionTimeout)
	if err == nil {
		t.Fatal("a version from a program that printed none")
	}
	if took > VersionTimeout+12*time.Second {
		t.Fatalf("gave up after %v, VersionTimeout is %v", took, VersionTimeout)
	}
}
