package codex

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestVersionWarning: the tested version and unreadable ones say nothing;
// newer and older ones say that ccrelay was not tested with them.
func TestVersionWarning(t *testing.T) {
	for _, tc := range []struct {
		v, want string
	}{
		{"0.169.0", ""},
		{"not a version", ""},
		{"0.170.0", "Codex 0.170.0 is newer than 0.169.0"},
		{"1.0.0", "Codex 1.0.0 is newer than 0.169.0"},
		{"0.117.0", "Codex 0.117.0 is older than 0.169.0"},
	} {
		got := VersionWarning(tc.v)
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("VersionWarning(%q) = %q, want it to start with %q", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		out, want string
		ok        bool
	}{
		{"codex-cli 0.169.0\n", "0.169.0", true},
		{"0.170.1", "0.170.1", true},
		{"codex-cli dev", "", false},
		{"", "", false},
	} {
		if v, ok := ParseVersionOutput(tc.out); v != tc.want || ok != tc.ok {
			t.Errorf("ParseVersionOutput(%q) = %q, %v", tc.out, v, ok)
		}
	}
}

// TestPaths: CODEX_HOME or ~/.codex, the day folders, and the thread id
// from a rollout's name.
func TestPaths(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := Home(getenv, "/home/u"); got != filepath.Join("/home/u", ".codex") {
		t.Errorf("Home without CODEX_HOME: %s", got)
	}
	env["CODEX_HOME"] = "/srv/codex"
	if got := Home(getenv, "/home/u"); got != "/srv/codex" {
		t.Errorf("Home with CODEX_HOME: %s", got)
	}
	day := DayDir("/c", time.Date(2026, 11, 7, 23, 0, 0, 0, time.Local))
	if day != filepath.Join("/c", "sessions", "2026", "11", "07") {
		t.Errorf("DayDir: %s", day)
	}
	for _, tc := range []struct{ name, id string }{
		{"rollout-2026-11-27T15-46-48-01a21db0-15a3-79c2-bd43-d66cd47ec9ef.jsonl", "01a21db0-15a3-79c2-bd43-d66cd47ec9ef"},
		{"/x/sessions/2026/11/27/rollout-2026-11-27T15-46-48-01A21DB0-15A3-79C2-BD43-D66CD47EC9EF.jsonl", "01a21db0-15a3-79c2-bd43-d66cd47ec9ef"},
		{"rollout-2026-11-27T15-46-48-01a21db0-15a3-79c2-bd43.jsonl", ""},
		{"session-01a21db0-15a3-79c2-bd43-d66cd47ec9ef.jsonl", ""},
		{"rollout-x-01a21db0-15a3-79c2-bd43-d66cd47ec9ef.json", ""},
	} {
		id, ok := ThreadID(tc.name)
		if id != tc.id || ok != (tc.id != "") {
			t.Errorf("ThreadID(%q) = %q, %v", tc.name, id, ok)
		}
	}

	home := t.TempDir()
	id := "01a21db0-15a3-79c2-bd43-d66cd47ec9ef"
	if _, err := FindRollout(home, id); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("FindRollout with none: %v", err)
	}
	if _, err := FindRollout(home, "../*"); err == nil {
		t.Fatal("FindRollout took a pattern for an id")
	}
	var want string
	for _, d := range []string{"2026/11/26", "2026/11/27"} {
		dir := filepath.Join(SessionsDir(home), filepath.FromSlash(d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		want = filepath.Join(dir, "rollout-"+strings.ReplaceAll(d, "/", "-")+"T10-00-00-"+id+".jsonl")
		if err := os.WriteFile(want, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FindRollout(home, strings.ToUpper(id)); err != nil || got != want {
		t.Fatalf("FindRollout = %s, %v; want %s", got, err, want)
	}
}

// TestParsePatch reads each operation of an apply_patch input.
func TestParsePatch(t *testing.T) {
	p, ok := ParsePatch("*** Begin Patch\n*** Add File: hello.txt\n+hello\n+world\n*** Update File: a.txt\n*** Move to: b.txt\n@@ def f():\n line2\n-line3\n+LINE3\n\n@@\n-x\n+y\n*** End of File\n*** Delete File: gone.txt\n*** End Patch\n")
	if !ok {
		t.Fatal("not a patch")
	}
	want := []PatchFile{
		{Op: PatchAdd, Path: "hello.txt", Hunks: []PatchHunk{{Lines: []string{"+hello", "+world"}}}},
		{Op: PatchUpdate, Path: "a.txt", MoveTo: "b.txt", Hunks: []PatchHunk{
			{Context: "def f():", Lines: []string{" line2", "-line3", "+LINE3", " "}},
			{Lines: []string{"-x", "+y"}}}},
		{Op: PatchDelete, Path: "gone.txt"},
	}
	if !reflect.DeepEqual(p.Files, want) {
		t.Fatalf("ParsePatch:\n got %+v\nwant %+v", p.Files, want)
	}
	if got := strings.Join(p.Paths(), " "); got != "hello.txt b.txt gone.txt" {
		t.Errorf("Paths: %s", got)
	}
	if _, ok := ParsePatch("just text"); ok {
		t.Error("text without *** Begin Patch taken as a patch")
	}
}

// The day folder after a rollout's: across a month's and a year's end,
// and none for a folder that is not a day's.
func TestNextDayDir(t *testing.T) {
	s := filepath.Join("h", "sessions")
	for _, tc := range []struct{ in, want string }{
		{filepath.Join(s, "2026", "11", "27"), filepath.Join(s, "2026", "11", "28")},
		{filepath.Join(s, "2026", "11", "30"), filepath.Join(s, "2026", "12", "01")},
		{filepath.Join(s, "2026", "12", "31"), filepath.Join(s, "2027", "01", "01")},
		{filepath.Join(s, "2028", "02", "28"), filepath.Join(s, "2028", "02", "29")},
		{filepath.Join(s, "2026", "13", "01"), ""},
		{filepath.Join("h", "project"), ""},
	} {
		if got := NextDayDir(tc.in); got != tc.want {
			t.Errorf("NextDayDir(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
	day := time.Date(2027, 3, 4, 1, 0, 0, 0, time.Local)
	if got, want := SameRootDayDir(filepath.Join(s, "2026", "11", "27"), day), filepath.Join(s, "2027", "03", "04"); got != want {
		t.Errorf("SameRootDayDir = %q, want %q", got, want)
	}
}
