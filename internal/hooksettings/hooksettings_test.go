package hooksettings

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is the hook the tests install; ours recognises it.
var entry = map[string]any{"type": "command", "command": "'/opt/ccrelay' follow hook"}

func ours(h map[string]any) bool {
	c, _ := h["command"].(string)
	return strings.Contains(c, "ccrelay") && strings.Contains(c, " follow hook")
}

func TestInstallRemoveRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		before *string // nil: no settings file
	}{
		{"no file", nil},
		{"empty object", ptr("{}")},
		{"empty file", ptr("")},
		{"unknown keys, odd order and layout", ptr(`{"zeta":1,"env":{"B":"2","A":"1"},   "model":"opus","big":12345678901234567890,"html":"a<b>&&c","permissions":{"allow":["Bash(ls:*)"]}}`)},
		{"own hooks kept", ptr("{\n  \"hooks\": {\n    \"SessionStart\": [\n      {\n        \"matcher\": \"startup\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"echo hi\"\n          }\n        ]\n      }\n    ],\n    \"Stop\": []\n  }\n}\n")},
		{"windows line ends", ptr("{\r\n  \"model\": \"sonnet\"\r\n}\r\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".claude", "settings.json")
			if tc.before != nil {
				write(t, path, *tc.before, 0o644)
			}
			res, err := Install(path, "SessionStart", entry, ours)
			if err != nil {
				t.Fatalf("Install: %v", err)
			}
			if !res.Changed {
				t.Fatal("Install changed nothing")
			}
			installed := read(t, path)
			s, err := Parse(installed)
			if err != nil {
				t.Fatalf("installed settings do not parse: %v\n%s", err, installed)
			}
			if n := s.Count("SessionStart", ours); n != 1 {
				t.Fatalf("installed settings hold %d hooks of ours, want 1:\n%s", n, installed)
			}
			if tc.before != nil {
				if got := read(t, path+BackupSuffix); !bytes.Equal(got, []byte(*tc.before)) {
					t.Fatalf("backup %q, want the file as it was %q", got, *tc.before)
				}
				if *tc.before != "" {
					checkKept(t, *tc.before, installed)
				}
			}
			// Installing again changes nothing.
			if res, err := Install(path, "SessionStart", entry, ours); err != nil || res.Changed {
				t.Fatalf("second Install: changed %v, err %v", res.Changed, err)
			}
			if !bytes.Equal(read(t, path), installed) {
				t.Fatal("second Install rewrote the file")
			}
			res, err = Remove(path, "SessionStart", ours)
			if err != nil {
				t.Fatalf("Remove: %v", err)
			}
			if !res.Changed || !res.Restored {
				t.Fatalf("Remove: changed %v, restored %v; want both", res.Changed, res.Restored)
			}
			if tc.before == nil {
				if _, err := os.Stat(path); !os.IsNotExist(err) {
					t.Fatalf("settings file left after Remove (err %v): %s", err, read(t, path))
				}
			} else {
				if got := read(t, path); !bytes.Equal(got, []byte(*tc.before)) {
					t.Fatalf("after Remove the file is\n%q\nwant, byte for byte,\n%q", got, *tc.before)
				}
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
					t.Fatalf("mode %v after Remove, want 0644", fi.Mode().Perm())
				}
			}
			if _, err := os.Stat(path + BackupSuffix); !os.IsNotExist(err) {
				t.Fatalf("backup left after a restore (err %v)", err)
			}
			// Removing again changes nothing.
			if res, err := Remove(path, "SessionStart", ours); err != nil || res.Changed {
				t.Fatalf("second Remove: changed %v, err %v", res.Changed, err)
			}
		})
	}
}

// checkKept checks that every key of before is in after with the same
// value, and in the same order.
func checkKept(t *testing.T, before string, after []byte) {
	t.Helper()
	b, err := Parse([]byte(before))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Parse(after)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range b.root.keys {
		if k == "hooks" {
			continue
		}
		if a.root.keys[i] != k {
			t.Fatalf("key %d is %q after Install, was %q: order changed", i, a.root.keys[i], k)
		}
		bv, _ := marshal(b.root.vals[k])
		av, _ := marshal(a.root.vals[k])
		if !bytes.Equal(bv, av) {
			t.Fatalf("%s is %s after Install, was %s", k, av, bv)
		}
	}
}

// A hook of ours that differs (ccrelay moved) is replaced in its place,
// and the backup of the first install stays, so that Remove still gives
// back the file as it was before it.
func TestInstallReplacesOurHook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	const before = `{"hooks":{"SessionStart":[{"matcher":"*","hooks":[{"type":"command","command":"echo mine"}]}]}}`
	write(t, path, before, 0o600)
	if _, err := Install(path, "SessionStart", entry, ours); err != nil {
		t.Fatal(err)
	}
	moved := map[string]any{"type": "command", "command": "'/usr/bin/ccrelay' follow hook"}
	res, err := Install(path, "SessionStart", moved, ours)
	if err != nil || !res.Changed || !res.Updated {
		t.Fatalf("Install of a moved ccrelay: %+v, %v; want changed and updated", res, err)
	}
	got := string(read(t, path))
	if strings.Contains(got, "/opt/ccrelay") || strings.Count(got, "follow hook") != 1 || !strings.Contains(got, "echo mine") {
		t.Fatalf("after the second Install:\n%s", got)
	}
	if b := string(read(t, path+BackupSuffix)); b != before {
		t.Fatalf("the backup became %q", b)
	}
	if res, err := Remove(path, "SessionStart", ours); err != nil || !res.Restored {
		t.Fatalf("Remove: %+v, %v", res, err)
	}
	if got := string(read(t, path)); got != before {
		t.Fatalf("after Remove: %q", got)
	}
}

func TestRemoveAfterOtherChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	write(t, path, `{"model":"opus"}`, 0o600)
	if _, err := Install(path, "SessionStart", entry, ours); err != nil {
		t.Fatal(err)
	}
	// The user (or Claude Code) changes something else meanwhile.
	s, err := Parse(read(t, path))
	if err != nil {
		t.Fatal(err)
	}
	s.root.set("theme", "dark")
	b, _ := s.Bytes()
	write(t, path, string(b), 0o600)

	res, err := Remove(path, "SessionStart", ours)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Restored {
		t.Fatalf("Remove: changed %v, restored %v; want changed, not restored", res.Changed, res.Restored)
	}
	got, err := Parse(read(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if got.Count("SessionStart", ours) != 0 {
		t.Fatalf("our hook is still there:\n%s", read(t, path))
	}
	if _, ok := got.root.vals["hooks"]; ok {
		t.Fatalf("an emptied hooks object was left:\n%s", read(t, path))
	}
	if got.root.vals["theme"] != "dark" || got.root.vals["model"] != "opus" {
		t.Fatalf("the other settings were not kept:\n%s", read(t, path))
	}
	if _, err := os.Stat(path + BackupSuffix); err != nil {
		t.Fatalf("the backup is gone though it was not restored: %v", err)
	}
}

func TestInstallRefuses(t *testing.T) {
	cases := []struct{ name, settings, want string }{
		{"invalid JSON", `{"model": "opus",}`, "not valid JSON"},
		{"truncated", `{"model": `, "not valid JSON"},
		{"not an object", `["a"]`, "not a JSON object"},
		{"trailing data", `{} {}`, "not valid JSON"},
		{"hooks not an object", `{"hooks": []}`, "hooks is not an object"},
		{"event not a list", `{"hooks": {"SessionStart": {}}}`, "hooks.SessionStart is not a list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			write(t, path, tc.settings, 0o600)
			_, err := Install(path, "SessionStart", entry, ours)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Install: %v; want an error naming %s and saying %q", err, path, tc.want)
			}
			if got := string(read(t, path)); got != tc.settings {
				t.Fatalf("the refused file was changed: %q", got)
			}
			if _, err := os.Stat(path + BackupSuffix); !os.IsNotExist(err) {
				t.Fatalf("a backup was written for a refused file (err %v)", err)
			}
			if _, err := Remove(path, "SessionStart", ours); err == nil {
				t.Fatal("Remove took a file it cannot read")
			}
		})
	}
}

func TestInstallThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "settings.json")
	write(t, target, `{"model":"opus"}`, 0o600)
	link := filepath.Join(dir, "settings.json")
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	if _, err := Install(link, "SessionStart", entry, ours); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced (err %v)", err)
	}
	if s, _ := Parse(read(t, target)); s.Count("SessionStart", ours) != 1 {
		t.Fatalf("the link's target does not hold the hook:\n%s", read(t, target))
	}
	if _, err := Remove(link, "SessionStart", ours); err != nil {
		t.Fatal(err)
	}
	if got := string(read(t, target)); got != `{"model":"opus"}` {
		t.Fatalf("target after Remove: %q", got)
	}
}

func ptr(s string) *string { return &s }

func write(t *testing.T, path, s string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
