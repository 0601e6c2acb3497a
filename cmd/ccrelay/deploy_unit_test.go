package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unitSettings are a unit file's Key=value lines, by key (a key given
// twice keeps its last value).
func unitSettings(unit string) map[string]string {
	set := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			set[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return set
}

// serveFlagRe finds the long flags in serve --help's flag list.
var serveFlagRe = regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`)

// docs/deploy.md's systemd unit: its ExecStart is a ccrelay serve whose
// every flag serve has and whose data folder is the one path the unit may
// write; systemd-analyze verify (where systemd is) finds nothing to say
// of it, with ccrelay's path the built binary's.
func TestDeploySystemdUnit(t *testing.T) {
	units := docBlocks(t, "## A systemd unit", "ini")
	if len(units) != 1 {
		t.Fatalf("the section has %d ini blocks, want 1", len(units))
	}
	unit := units[0]
	set := unitSettings(unit)
	args := strings.Fields(set["ExecStart"])
	if len(args) < 2 || args[0] != "/usr/local/bin/ccrelay" || args[1] != "serve" {
		t.Fatalf("ExecStart is not /usr/local/bin/ccrelay serve: %q", set["ExecStart"])
	}
	help, err := exec.Command(binary, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, help)
	}
	known := map[string]bool{}
	for _, m := range serveFlagRe.FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	if !known["--data"] || !known["--acme"] {
		t.Fatalf("serve --help lists no --data or --acme: the flag list is not read right:\n%s", help)
	}
	data := ""
	for i, a := range args[2:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !known[name] {
			t.Errorf("ExecStart gives serve %s, which serve does not have", name)
		}
		if name == "--data" && i+3 < len(args) {
			data = args[i+3]
		}
	}
	if data == "" || set["ReadWritePaths"] != data {
		t.Errorf("the unit may write %q, serve's data folder is %q: they must be the same", set["ReadWritePaths"], data)
	}
	for key, want := range map[string]string{"AmbientCapabilities": "CAP_NET_BIND_SERVICE", "ExecReload": "/bin/kill -HUP $MAINPID", "Restart": "on-failure"} {
		if set[key] != want {
			t.Errorf("%s=%s, want %s", key, set[key], want)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("no systemd-analyze (%v): the unit is checked as parsed only", err)
		return
	}
	path := filepath.Join(t.TempDir(), "ccrelay.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "/usr/local/bin/ccrelay", binary, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
