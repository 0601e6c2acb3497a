package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/daemon"
	"github.com/ccrelay/ccrelay/internal/durable"
	"github.com/ccrelay/ccrelay/internal/logfile"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
)

type daemonFlags struct {
	relay, relayToken, tokenFile, state, claude, codex, name string
	allow                                                    []string
	onlyAllowed, allowBypass, plaintext                      bool
	maxSessions                                              int
}

func newDaemonCmd() *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Let the app start, resume and stop sessions on this machine",
		Long: `ccrelay daemon keeps one connection to the relay and announces this machine: its name, OS,
the versions of Claude Code and Codex it has and the folders sessions may start in. From the app,
"New session" starts a remote-mode session of either (ccrelay --remote, ccrelay codex --remote)
in one of them as the daemon's child; "Resume" continues one of their past sessions there; "Stop"
ends one.

Sessions start only in the folders Claude Code already knows (its projects folder, those that
still exist), those Codex knows when it is installed (the cwd of its past threads) and under
each --allow folder; nothing else is ever started. bypassPermissions is
offered only with --allow-bypass-from-app. Every session ends with the daemon, however it stops.

ccrelay daemon install runs it at login (a systemd user unit on Linux, a launchd agent on macOS).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDaemon(cmd.Context(), &f, cmd.ErrOrStderr()) },
	}
	addDaemonFlags(cmd, &f)
	cmd.AddCommand(newDaemonInstallCmd(), newDaemonUninstallCmd())
	return cmd
}

func addDaemonFlags(cmd *cobra.Command, f *daemonFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.relay, "relay", "", "the relay's URL (default $CCRELAY_RELAY, or the relay ccrelay pair or ccrelay login remembered)")
	fl.StringVar(&f.relayToken, "relay-token", "", "the relay's token (visible in ps: prefer --relay-token-file; default $CCRELAY_TOKEN, this machine's credential from ccrelay login, or the token of a relay on this machine)")
	fl.StringVar(&f.tokenFile, "relay-token-file", "", "read the relay's token from this file (mode 0600)")
	fl.StringVar(&f.state, "state", "", "state folder (default $XDG_STATE_HOME/ccrelay; %LocalAppData%\\ccrelay\\state on Windows)")
	fl.StringVar(&f.claude, "claude", "claude", "the claude binary sessions run")
	fl.StringVar(&f.codex, "codex", "codex", "the codex binary Codex sessions run (the app offers Codex when it runs)")
	fl.StringVar(&f.name, "name", "", "this machine's name in the app (default its host name)")
	fl.StringArrayVar(&f.allow, "allow", nil, "also allow sessions in this folder and every folder below it (repeatable)")
	fl.BoolVar(&f.onlyAllowed, "only-allowed", false, "allow only the --allow folders, not the folders Claude Code or Codex already knows")
	fl.BoolVar(&f.allowBypass, "allow-bypass-from-app", false, "let the app start sessions in bypassPermissions (every tool runs without asking)")
	fl.BoolVar(&f.plaintext, "plaintext", false, "send to a relay on another machine even when no device is paired with this machine (the relay can read everything)")
	fl.IntVar(&f.maxSessions, "max-sessions", daemon.DefaultMaxSessions, "the most sessions the app can run here at once")
}

// daemonSessionFile keeps the daemon's session id: the same across restarts,
// so the app finds the machine where it was.
const daemonSessionFile = "session"

// MaxDaemonLogBytes bounds daemon.log: past it, the log becomes
// daemon.log.1 (replacing the one before) and a new one starts.
const MaxDaemonLogBytes = 8 << 20

// logsToStderr says whether the daemon's log also goes to stderr: on a
// terminal, and to systemd's journal (which bounds itself); not to a file
// a service manager appends stderr to (launchd), which nothing bounds.
func logsToStderr(stderr io.Writer) bool {
	f, ok := stderr.(*os.File)
	return ok && (term.IsTerminal(int(f.Fd())) || os.Getenv("JOURNAL_STREAM") != "")
}

func runDaemon(ctx context.Context, f *daemonFlags, stderr io.Writer) error {
	if f.maxSessions < 1 {
		return errors.New("--max-sessions must be at least 1")
	}
	if f.onlyAllowed && len(f.allow) == 0 {
		return errors.New("--only-allowed needs at least one --allow folder")
	}
	state, err := stateDir(f.state)
	if err != nil {
		return err
	}
	if f.relay, _, err = chooseRelay(f.relay, state); err != nil {
		return err
	}
	if f.relay == "" {
		return errors.New("ccrelay daemon needs a relay, as the app reaches this machine through it: run ccrelay setup (or ccrelay login) once, or give --relay URL")
	}
	dir := filepath.Join(state, "daemon")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("daemon state: %w", err)
	}
	// One daemon per state folder: a second would take the same session.
	lock, err := launcher.TryLock(filepath.Join(dir, "lock"))
	if errors.Is(err, launcher.ErrLocked) {
		return fmt.Errorf("a ccrelay daemon already runs with the state folder %s", state)
	}
	if err != nil {
		return fmt.Errorf("daemon lock: %w", err)
	}
	defer lock.Close()
	logFile, err := logfile.Open(filepath.Join(dir, "daemon.log"), MaxDaemonLogBytes)
	if err != nil {
		return err
	}
	defer logFile.Close()
	var logTo io.Writer = logFile
	if logsToStderr(stderr) {
		logTo = io.MultiWriter(logFile, stderr)
	}
	log := slog.New(slog.NewTextHandler(logTo, nil))

	token, err := relayToken(f.relayToken, f.tokenFile, "", state, f.relay, stderr)
	if err != nil {
		return err
	}
	// The sessions read the token from a file, never from their command line.
	tokenFile := f.tokenFile
	if tokenFile == "" {
		tokenFile = filepath.Join(dir, "token")
		if err := durable.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return fmt.Errorf("keep the token for the sessions: %w", err)
		}
	}
	kr, err := openKeyring(state)
	if err != nil {
		return err
	}
	if err := checkPlaintext(f.relay, kr, f.plaintext); err != nil {
		return err
	}
	session, err := daemonSession(dir)
	if err != nil {
		return err
	}
	box, err := apiclient.OpenOutboxWith(filepath.Join(dir, "outbox"), apiclient.OutboxOptions{Logger: log, Sealer: kr, Relay: f.relay})
	if err != nil {
		return err
	}
	defer box.Close()
	tellHeld(stderr, box)
	ledger, err := launcher.OpenLedger(filepath.Join(dir, "commands.jsonl"))
	if err != nil {
		return err
	}
	defer ledger.Close()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find ccrelay's own path: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	version, _ := checkClaudeVersion(ctx, f.claude, log, io.Discard)
	// Codex sessions are offered when its version can be read.
	codexVersion, _ := checkCodexVersion(ctx, f.codex, log, io.Discard)
	name := protocol.CleanName(f.name, relay.MaxCredentialName)
	if name == "" {
		host, _ := os.Hostname()
		name = protocol.CleanName(host, relay.MaxCredentialName)
	}
	command := []string{self, "--relay", f.relay, "--relay-token-file", tokenFile, "--state", state, "--claude", f.claude}
	codexCommand := []string{self, "codex", "--relay", f.relay, "--relay-token-file", tokenFile, "--state", state, "--codex", f.codex}
	if f.plaintext {
		command = append(command, "--plaintext")
		codexCommand = append(codexCommand, "--plaintext")
	}
	client := apiclient.NewClient(apiclient.Config{URL: f.relay, Token: token, Logger: log, Notice: stderr, Keyring: kr}, box)
	sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
	sendDone := make(chan error, 1)
	go func() { sendDone <- client.Run(sendCtx) }()
	// The app reaches this machine once the relay took the connection,
	// not before: until then the client says why it cannot reach it.
	fmt.Fprintf(stderr, "ccrelay daemon: %s (session %s) is connecting to %s\n", name, session, f.relay)
	sayCtx, stopSay := context.WithCancel(sendCtx)
	sayDone := make(chan struct{})
	go func() {
		defer close(sayDone)
		if waitConnected(sayCtx, client) {
			fmt.Fprintf(stderr, "ccrelay daemon: %s is reachable from the app through %s (session %s)\n", name, f.relay, session)
		}
	}()
	defer func() { stopSay(); <-sayDone }()
	runErr := daemon.Run(ctx, daemon.Config{Link: client, Ledger: ledger, Session: session, Command: command,
		ClaudeDir: claude.ConfigDir(os.Getenv, home), Roots: f.allow, NoKnown: f.onlyAllowed, AllowBypass: f.allowBypass,
		Machine: name, ClaudeVersion: version, CodexVersion: codexVersion, CodexCommand: codexCommand, CodexHome: codex.Home(os.Getenv, home),
		CodexBusy:   func(thread string) bool { return launcher.CodexThreadBusy(state, thread) },
		MaxSessions: f.maxSessions, Output: logFile, Logger: log})
	stopSend()
	if err := <-sendDone; err != nil && !errors.Is(err, context.Canceled) && runErr == nil {
		runErr = err
	}
	return runErr
}

// connectedPoll is how often waitConnected looks at the client.
const connectedPoll = 50 * time.Millisecond

// waitConnected reports true once client has a connection to the relay,
// false if ctx ends first.
func waitConnected(ctx context.Context, client *apiclient.Client) bool {
	t := time.NewTicker(connectedPoll)
	defer t.Stop()
	for !client.Connected() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// daemonSession reads the daemon's session id, made once.
func daemonSession(dir string) (string, error) {
	path := filepath.Join(dir, daemonSessionFile)
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			id := strings.TrimSpace(string(b))
			if !launcher.ValidSessionID(id) {
				return "", fmt.Errorf("%s holds no session id", path)
			}
			return id, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		// Made once: two daemons starting together keep the first.
		if err := durable.Publish(path, []byte(claude.NewSessionID()+"\n"), 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("daemon session: %w", err)
		}
	}
	return "", fmt.Errorf("daemon session: %s could not be made", path)
}
