package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ccrelay/ccrelay/relay"
)

// serviceID names a service: its systemd unit, launchd label and Windows
// task, what it is, and the file of its command (Windows) or log (macOS).
type serviceID struct {
	unit, label, task, what, file string
}

// The services ccrelay installs: the daemon (ccrelay daemon install) and
// the relay (ccrelay setup).
var (
	daemonService = serviceID{unit: "ccrelay-daemon.service", label: "dev.ccrelay.daemon", task: "ccrelay-daemon",
		what: "ccrelay daemon: start Claude Code and Codex sessions from the app", file: "daemon"}
	relayService = serviceID{unit: "ccrelay-relay.service", label: "dev.ccrelay.relay", task: "ccrelay-relay",
		what: "ccrelay relay: the server phones and ccrelay connect to", file: "relay"}
)

// serviceFile is what `ccrelay daemon install` writes, and the commands
// that enable it (uninstall's disable it before the file is removed).
type serviceFile struct {
	Path      string
	Content   string
	Enable    [][]string
	Disable   [][]string
	Uninstall [][]string // run after the file is removed
}

// serviceEnv is what a service is made from: the platform, the user's
// folders, and the daemon's command line.
type serviceEnv struct {
	ID                     serviceID // the daemon's when empty
	GOOS, Home, ConfigHome string
	UID                    int
	Args                   []string // ccrelay and its daemon flags
	Path                   string   // PATH, so that the service finds claude and node
}

// serviceFor is the service that runs the daemon at login: a systemd user
// unit on Linux, a launchd agent on macOS, a Task Scheduler task on
// Windows. The service restarts the daemon if it fails; stopping it stops
// the daemon first (which ends its sessions), then what is left.
func serviceFor(e serviceEnv) (serviceFile, error) {
	id := e.ID
	if id == (serviceID{}) {
		id = daemonService
	}
	switch e.GOOS {
	case "linux":
		cfg := e.ConfigHome
		if cfg == "" {
			cfg = filepath.Join(e.Home, ".config")
		}
		var b strings.Builder
		b.WriteString("[Unit]\nDescription=" + id.what + "\nWants=network-online.target\nAfter=network-online.target\n\n")
		b.WriteString("[Service]\nType=simple\nExecStart=" + systemdCommand(e.Args) + "\n")
		if e.Path != "" {
			b.WriteString("Environment=" + systemdQuote("PATH="+e.Path) + "\n")
		}
		// mixed: SIGTERM to the daemon alone, which ends its sessions
		// (each notes why); SIGKILL to what is left after the timeout.
		b.WriteString("Restart=on-failure\nRestartSec=5\nKillMode=mixed\nTimeoutStopSec=30\n\n[Install]\nWantedBy=default.target\n")
		return serviceFile{Path: filepath.Join(cfg, "systemd", "user", id.unit), Content: b.String(),
			Enable:    [][]string{{"systemctl", "--user", "daemon-reload"}, {"systemctl", "--user", "enable", "--now", id.unit}},
			Disable:   [][]string{{"systemctl", "--user", "disable", "--now", id.unit}},
			Uninstall: [][]string{{"systemctl", "--user", "daemon-reload"}}}, nil
	case "darwin":
		// launchd appends the service's stderr to logPath and never bounds
		// it: ccrelay bounds it at each start (StderrLogEnv), and the relay,
		// which logs every connection, writes its log there itself, turned
		// over at --log-file-max.
		logPath := filepath.Join(e.Home, "Library", "Logs", "ccrelay-"+id.file+".log")
		args := e.Args
		if id == relayService && !slices.Contains(args, "--log-file") {
			args = append(slices.Clone(args), "--log-file", logPath)
		}
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
			`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">` + "\n" +
			"<plist version=\"1.0\">\n<dict>\n\t<key>Label</key>\n\t<string>" + id.label + "</string>\n\t<key>ProgramArguments</key>\n\t<array>\n")
		for _, a := range args {
			b.WriteString("\t\t<string>" + xmlEscape(a) + "</string>\n")
		}
		b.WriteString("\t</array>\n\t<key>RunAtLoad</key>\n\t<true/>\n\t<key>KeepAlive</key>\n\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>\n")
		b.WriteString("\t<key>EnvironmentVariables</key>\n\t<dict>\n")
		if e.Path != "" {
			b.WriteString("\t\t<key>PATH</key>\n\t\t<string>" + xmlEscape(e.Path) + "</string>\n")
		}
		b.WriteString("\t\t<key>" + StderrLogEnv + "</key>\n\t\t<string>" + xmlEscape(logPath) + "</string>\n\t</dict>\n")
		b.WriteString("\t<key>StandardErrorPath</key>\n\t<string>" + xmlEscape(logPath) + "</string>\n</dict>\n</plist>\n")
		domain := "gui/" + strconv.Itoa(e.UID)
		path := filepath.Join(e.Home, "Library", "LaunchAgents", id.label+".plist")
		return serviceFile{Path: path, Content: b.String(),
			Enable:  [][]string{{"launchctl", "bootstrap", domain, path}},
			Disable: [][]string{{"launchctl", "bootout", domain + "/" + id.label}}}, nil
	case "windows":
		// A task at logon; the file is the command it runs.
		path := filepath.Join(e.ConfigHome, "ccrelay", id.file+".cmd")
		content := "@echo off\r\n" + windowsCommand(e.Args) + "\r\n"
		return serviceFile{Path: path, Content: content,
			Enable:  [][]string{{"schtasks", "/Create", "/F", "/SC", "ONLOGON", "/TN", id.task, "/TR", `"` + path + `"`}, {"schtasks", "/Run", "/TN", id.task}},
			Disable: [][]string{{"schtasks", "/End", "/TN", id.task}, {"schtasks", "/Delete", "/F", "/TN", id.task}}}, nil
	}
	return serviceFile{}, fmt.Errorf("ccrelay daemon install does not know how to run a service on %s: run ccrelay daemon from your own service manager", e.GOOS)
}

// systemdCommand quotes each argument for ExecStart.
func systemdCommand(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = systemdQuote(a)
	}
	return strings.Join(q, " ")
}

// systemdQuote is a double-quoted systemd word: backslash and quote
// escaped, and % and $ doubled so that systemd expands nothing.
func systemdQuote(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$", "\n", `\n`).Replace(s)
	return `"` + s + `"`
}

// windowsCommand quotes each argument for cmd.exe.
func windowsCommand(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = `"` + strings.NewReplacer(`"`, `""`, "%", "%%").Replace(a) + `"`
	}
	return strings.Join(q, " ")
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// runner runs a service manager's command (tests replace it).
var runner = func(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func currentServiceEnv(args []string) (serviceEnv, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return serviceEnv{}, err
	}
	cfg, err := os.UserConfigDir()
	if err != nil {
		cfg = ""
	}
	if runtime.GOOS == "linux" {
		cfg = os.Getenv("XDG_CONFIG_HOME") // "" means ~/.config, as systemd reads it
	}
	return serviceEnv{GOOS: runtime.GOOS, Home: home, ConfigHome: cfg, UID: os.Getuid(), Args: args, Path: os.Getenv("PATH")}, nil
}

func newDaemonInstallCmd() *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Run ccrelay daemon at login (systemd user unit, launchd agent, or a Windows logon task) with these flags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return daemonInstall(cmd, &f, cmd.OutOrStdout())
		},
	}
	addDaemonFlags(cmd, &f)
	return cmd
}

func daemonInstall(cmd *cobra.Command, f *daemonFlags, out io.Writer) error {
	// The service runs with the relay chosen now, written in its command.
	state, err := stateDir(f.state)
	if err != nil {
		return err
	}
	if f.relay, _, err = chooseRelay(f.relay, state); err != nil {
		return err
	}
	if f.relay == "" {
		return errors.New("ccrelay daemon install needs a relay: run ccrelay setup (or ccrelay login) once, or give --relay URL")
	}
	if f.relayToken != "" {
		return errors.New("a service's command line is readable by every user: give the token with --relay-token-file, or run ccrelay login first")
	}
	if f.tokenFile == "" && !serviceCredential(f.state) {
		return errors.New("the service needs a credential it can read by itself ($CCRELAY_TOKEN is not passed on): run ccrelay login, or give --relay-token-file")
	}
	self, err := serviceBinary()
	if err != nil {
		return err
	}
	args := []string{self, "daemon"}
	// The flags given, as given (absolute paths for files and folders).
	var ferr error
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		vals := []string{fl.Value.String()}
		if sv, ok := fl.Value.(interface{ GetSlice() []string }); ok {
			vals = sv.GetSlice()
		}
		for _, v := range vals {
			switch fl.Name {
			case "relay-token-file", "state", "allow":
				abs, err := filepath.Abs(v)
				if err != nil {
					ferr = err
				}
				v = abs
			}
			if fl.Value.Type() == "bool" {
				args = append(args, "--"+fl.Name+"="+v)
			} else {
				args = append(args, "--"+fl.Name, v)
			}
		}
	})
	if ferr != nil {
		return ferr
	}
	env, err := currentServiceEnv(args)
	if err != nil {
		return err
	}
	svc, err := serviceFor(env)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(svc.Path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(svc.Path, []byte(svc.Content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", svc.Path, err)
	}
	for _, c := range svc.Enable {
		if err := runner(c[0], c[1:]...); err != nil {
			return fmt.Errorf("%s is written, but enabling it failed: %w", svc.Path, err)
		}
	}
	fmt.Fprintf(out, "ccrelay daemon installed: %s\nIt runs now and at every login; ccrelay daemon uninstall removes it.\n", svc.Path)
	return nil
}

// serviceBinary is this ccrelay's path, for a service to run; a ccrelay
// that go run built, in a folder go run deletes when it ends, is refused.
func serviceBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("this ccrelay's path, for the service: %w", err)
	}
	for _, part := range strings.Split(filepath.ToSlash(self), "/") {
		if strings.HasPrefix(part, "go-build") {
			return "", fmt.Errorf("this ccrelay was built by go run in %s, which go run deletes when it ends: a service cannot run it; install ccrelay first (go install github.com/ccrelay/ccrelay/cmd/ccrelay@latest, or a release), then run the installed one", filepath.Dir(self))
		}
	}
	return self, nil
}

// serviceCredential reports whether a daemon started without a token flag
// finds one by itself: this machine's login, or a relay on this machine.
func serviceCredential(stateFlag string) bool {
	if st, err := stateDir(stateFlag); err == nil {
		if _, err := readLogin(st); err == nil {
			return true
		}
	}
	dir, err := dataDir("")
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, relay.TokenFile))
	return err == nil
}

func newDaemonUninstallCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall",
		Short: "Stop the daemon and remove what ccrelay daemon install wrote",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := currentServiceEnv(nil)
			if err != nil {
				return err
			}
			return daemonUninstall(env, cmd.OutOrStdout())
		},
	}
}

func daemonUninstall(env serviceEnv, out io.Writer) error {
	svc, err := serviceFor(env)
	if err != nil {
		return err
	}
	if _, err := os.Stat(svc.Path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "ccrelay daemon is not installed (no %s)\n", svc.Path)
		return nil
	}
	var errs []error
	for _, c := range svc.Disable {
		if err := runner(c[0], c[1:]...); err != nil {
			errs = append(errs, err) // removed all the same
		}
	}
	if err := os.Remove(svc.Path); err != nil {
		return err
	}
	for _, c := range svc.Uninstall {
		if err := runner(c[0], c[1:]...); err != nil {
			errs = append(errs, err)
		}
	}
	fmt.Fprintf(out, "ccrelay daemon uninstalled: %s removed\n", svc.Path)
	return errors.Join(errs...)
}
