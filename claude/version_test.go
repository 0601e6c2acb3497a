package claude

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestCompareVersionsAndWarning(t *testing.T) {
	tests := []struct {
		a, b string
		cmp  int
		ok   bool
	}{
		{"2.1.330", "2.1.330", 0, true},
		{"2.1.197", "2.1.330", -1, true},
		{"2.1.331", "2.1.330", 1, true},
		{"2.2.0", "2.1.330", 1, true},
		{"10.0.0", "9.9.9", 1, true},
		{"2.1", "2.1.0", 0, true},
		{"2.1.330 (Claude Code)", "2.1.330", 0, true},
		{"v2.1.400", "2.1.330", 1, true},
		{"2.1.400-beta.1", "2.1.330", 1, true},
		{"", "2.1.330", 0, false},
		{"two", "2.1.330", 0, false},
		{"2.x.1", "2.1.330", 0, false},
	}
	for _, tt := range tests {
		cmp, ok := CompareVersions(tt.a, tt.b)
		if cmp != tt.cmp || ok != tt.ok {
			t.Errorf("CompareVersions(%q, %q) = %d, %v; want %d, %v", tt.a, tt.b, cmp, ok, tt.cmp, tt.ok)
		}
	}
	for v, warn := range map[string]bool{TestedVersion: false, "2.1.197": false, "2.1.331": true, "3.0.0": true, "garbage": false, "": false} {
		if got := VersionWarning(v); (got != "") != warn {
			t.Errorf("VersionWarning(%q) = %q", v, got)
		}
	}
}

func TestInstalledVersion(t *testing.T) {
	dir := t.TempDir()
	write := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if v, err := InstalledVersion(context.Background(), write("good", `echo "2.1.400 (Claude Code)"`)); err != nil || v != "2.1.400" {
		t.Fatalf("got %q, %v", v, err)
	}
	if _, err := InstalledVersion(context.Background(), write("bad", `echo "hello"`)); err == nil {
		t.Fatal("no error for a non-version")
	}
	if _, err := InstalledVersion(context.Background(), write("fails", `exit 3`)); err == nil {
		t.Fatal("no error for a failing claude")
	}
}
