package main

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The service each platform gets runs exactly the daemon's command line,
// whatever its arguments hold (spaces, quotes, %, $, <, &), restarts the
// daemon when it fails, and stops the daemon before what it started.
func TestServiceFor(t *testing.T) {
	args := []string{"/opt/cc relay/ccrelay", "daemon", "--relay", "https://relay.example.com", "--allow", `/home/me/100% "real" $HOME <&>`}
	env := serviceEnv{Home: "/home/me", UID: 501, Args: args, Path: "/usr/local/bin:/usr/bin"}

	env.GOOS = "linux"
	svc, err := serviceFor(env)
	if err != nil {
		t.Fatal(err)
	}
	if svc.Path != "/home/me/.config/systemd/user/ccrelay-daemon.service" {
		t.Errorf("unit at %s", svc.Path)
	}
	for _, want := range []string{
		`ExecStart="/opt/cc relay/ccrelay" "daemon" "--relay" "https://relay.example.com" "--allow" "/home/me/100%% \"real\" $$HOME <&>"`,
		`Environment="PATH=/usr/local/bin:/usr/bin"`, "Restart=on-failure", "KillMode=mixed", "WantedBy=default.target",
	} {
		if !strings.Contains(svc.Content, want) {
			t.Errorf("unit lacks %s:\n%s", want, svc.Content)
		}
	}
	if !slices.ContainsFunc(svc.Enable, func(c []string) bool {
		return strings.Join(c, " ") == "systemctl --user enable --now ccrelay-daemon.service"
	}) {
		t.Errorf("enabled with %v", svc.Enable)
	}
	env.ConfigHome = "/xdg"
	if svc, _ := serviceFor(env); svc.Path != "/xdg/systemd/user/ccrelay-daemon.service" {
		t.Errorf("with XDG_CONFIG_HOME: %s", svc.Path)
	}

	env.GOOS = "darwin"
	svc, err = serviceFor(env)
	if err != nil {
		t.Fatal(err)
	}
	if svc.Path != "/home/me/Library/LaunchAgents/dev.ccrelay.daemon.plist" {
		t.Errorf("agent at %s", svc.Path)
	}
	// The plist is XML whose ProgramArguments are the arguments, as given.
	var got []string
	dec := xml.NewDecoder(strings.NewReader(svc.Content))
	dec.Strict, dec.Entity = false, xml.HTMLEntity
	inArgs := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if tk.Name.Local == "array" {
				inArgs = true
			}
			if tk.Name.Local == "string" && inArgs {
				var s string
				dec.DecodeElement(&s, &tk)
				got = append(got, s)
			}
		case xml.EndElement:
			if tk.Name.Local == "array" {
				inArgs = false
			}
		}
	}
	if !slices.Equal(got, args) {
		t.Errorf("ProgramArguments %q, want %q", got, args)
	}
	if !strings.Contains(svc.Content, "<key>SuccessfulExit</key>") || strings.Join(svc.Enable[0], " ") != "launchctl bootstrap gui/501 "+svc.Path {
		t.Errorf("agent:\n%s\nenabled with %v", svc.Content, svc.Enable)
	}

	env.GOOS, env.ConfigHome = "windows", `C:\Users\me\AppData\Roaming`
	svc, err = serviceFor(env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svc.Content, `"/home/me/100%% ""real"" $HOME <&>"`) || svc.Enable[0][0] != "schtasks" {
		t.Errorf("task:\n%s\n%v", svc.Content, svc.Enable)
	}

	env.GOOS = "plan9"
	if _, err := serviceFor(env); err == nil {
		t.Error("a service for plan9")
	}
}

// ccrelay daemon install writes the user unit with the flags given (files
// and folders made absolute), enables it with systemctl --user, and
// refuses a token on the command line; uninstall disables it and removes
// the unit.
func TestDaemonInstallUninstall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the systemd unit is Linux's; TestServiceFor checks the others' files")
	}
	home, cfg, bin := t.TempDir(), t.TempDir(), t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\n"), 0o755)
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	work := t.TempDir()
	os.MkdirAll(filepath.Join(work, "projects"), 0o700)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + cfg, "PATH=" + bin + ":/usr/bin:/bin"}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(binary, args...)
		cmd.Dir = work
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("daemon", "install", "--relay", "https://relay.example.com", "--relay-token", "secret"); err == nil || !strings.Contains(out, "readable by every user") {
		t.Fatalf("a token on the command line: %v\n%s", err, out)
	}
	out, err := run("daemon", "install", "--relay", "https://relay.example.com", "--relay-token-file", token, "--allow", "projects", "--allow-bypass-from-app")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	unit := filepath.Join(cfg, "systemd", "user", "ccrelay-daemon.service")
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatalf("no unit: %v\n%s", err, out)
	}
	for _, want := range []string{`"daemon" "--allow"`, `"--relay" "https://relay.example.com"`, `"--relay-token-file" "` + token + `"`,
		`"--allow" "` + filepath.Join(work, "projects") + `"`, `"--allow-bypass-from-app=true"`, "KillMode=mixed"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("unit lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "secret") {
		t.Errorf("the token is in the unit:\n%s", b)
	}
	if out, err := run("daemon", "uninstall"); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Fatalf("unit left: %v", err)
	}
	got, _ := os.ReadFile(calls)
	want := "--user daemon-reload\n--user enable --now ccrelay-daemon.service\n--user disable --now ccrelay-daemon.service\n--user daemon-reload\n"
	if string(got) != want {
		t.Fatalf("systemctl calls:\n%s\nwant:\n%s", got, want)
	}
}
