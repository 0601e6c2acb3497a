package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/hooksettings"
	"github.com/ccrelay/ccrelay/internal/logfile"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// ModeFollowed is the mode announced for a session of plain claude that
// ccrelay follows (ccrelay follow install): the app shows it read-only,
// since nothing can reach that Claude from the app.
const ModeFollowed = "followed"

// followRejected answers every command the app sends a followed session.
const followRejected = "this session runs in plain claude, which ccrelay only follows: to steer it from the app, quit it and run ccrelay --resume %s in its folder"

func newFollowCmd() *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "follow",
		Short: "Relay sessions started with plain claude too (install or remove Claude Code's SessionStart hook)",
		Long: `ccrelay follow install adds a SessionStart hook to Claude Code's user settings
(~/.claude/settings.json, or $CLAUDE_CONFIG_DIR/settings.json): every session started with plain
claude, in any terminal or editor, is then followed and relayed to the relay ccrelay remembers
(ccrelay pair or ccrelay login), read-only: steering a session from the app needs ccrelay.
A session that runs under ccrelay is relayed by that ccrelay, not twice.

The settings are merged (every other setting kept), backed up beside them first
(settings.json.ccrelay-backup), and a file that is not valid JSON is left alone.
ccrelay follow uninstall takes the hook out: the file is then as it was, byte for byte,
when nothing else changed in it meanwhile.

ccrelay follow says whether the hook is installed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			followed, path, err := followState()
			if err != nil {
				return err
			}
			if followed {
				fmt.Fprintf(cmd.OutOrStdout(), "Sessions of plain claude are followed: the hook is in %s (ccrelay follow uninstall takes it out).\n", path)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Sessions of plain claude are not followed (ccrelay follow install adds the hook to %s).\n", path)
			}
			return nil
		},
	}
	install := &cobra.Command{
		Use:   "install",
		Short: "Follow every session of plain claude: add the SessionStart hook to Claude Code's user settings",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return followInstall(state, cmd.OutOrStdout()) },
	}
	install.Flags().StringVar(&state, "state", "", "state folder the followed sessions use (default $XDG_STATE_HOME/ccrelay; %LocalAppData%\\ccrelay\\state on Windows)")
	uninstall := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop following sessions of plain claude: take the hook out of Claude Code's user settings",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return followUninstall(cmd.OutOrStdout()) },
	}
	cmd.AddCommand(install, uninstall, newFollowHookCmd(), newFollowSessionCmd())
	return cmd
}

// claudeSettingsPath is Claude Code's user settings file.
func claudeSettingsPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(claude.ConfigDir(os.Getenv, home), "settings.json"), nil
}

// followState says whether sessions of plain claude are followed: whether
// Claude Code's user settings, at path, hold the hook.
func followState() (followed bool, path string, err error) {
	path, err = claudeSettingsPath()
	if err != nil {
		return false, "", err
	}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, path, fmt.Errorf("read Claude Code's settings: %w", err)
	}
	s, err := hooksettings.Parse(b)
	if err != nil {
		return false, path, fmt.Errorf("Claude Code's settings %s is %v", path, err)
	}
	return s.Count("SessionStart", isFollowHook) > 0, path, nil
}

// followHookArgs are the hook's arguments after ccrelay's path.
var followHookArgs = []string{"follow", "hook"}

// isFollowHook recognises the hook of ccrelay follow install, whichever
// ccrelay installed it: a command of ccrelay's followed by "follow hook".
func isFollowHook(h map[string]any) bool {
	argv := []string{}
	if c, ok := h["command"].(string); ok {
		argv = append(argv, c)
	}
	if args, ok := h["args"].([]any); ok {
		for _, a := range args {
			if s, ok := a.(string); ok {
				argv = append(argv, s)
			}
		}
	}
	line := strings.Join(argv, " ")
	return strings.Contains(strings.ToLower(line), "ccrelay") && strings.Contains(line, " "+strings.Join(followHookArgs, " "))
}

func followInstall(state string, out io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find ccrelay's own path for the hook: %w", err)
	}
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	st, err := stateDir(state)
	if err != nil {
		return err
	}
	// The hook names the state folder found now, whether given or not:
	// it runs with Claude's environment (an editor started from the
	// desktop, a project's settings' "env"), whose XDG_STATE_HOME may name
	// another folder, with another relay and other keys, or none.
	if st, err = filepath.Abs(st); err != nil {
		return err
	}
	argv := append([]string{self}, followHookArgs...)
	argv = append(argv, "--state", st)
	relayURL, _, err := chooseRelay("", st)
	if err != nil {
		return err
	}
	path, err := claudeSettingsPath()
	if err != nil {
		return err
	}
	res, err := hooksettings.Install(path, "SessionStart", launcher.HookEntry(argv), isFollowHook)
	if err != nil {
		return err
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(out, "The hook is already in %s: sessions of plain claude are followed.\n", path)
	case res.Updated:
		fmt.Fprintf(out, "Updated the hook in %s to run %s.\n", path, self)
	case res.Backup != "":
		fmt.Fprintf(out, "Added the hook to %s (as it was before: %s).\n", path, res.Backup)
	default:
		fmt.Fprintf(out, "Added the hook to %s.\n", path)
	}
	switch {
	case relayURL == "":
		fmt.Fprintln(out, "No relay is set up yet: run ccrelay setup (or ccrelay login) once; until then sessions of plain claude are not relayed.")
	case followBlocked(st, relayURL) != nil:
		fmt.Fprintf(out, "Sessions of plain claude cannot be relayed to %s yet: %v\n", relayURL, followBlocked(st, relayURL))
	default:
		fmt.Fprintf(out, "Sessions started with plain claude now go to %s, read-only in the app (steering one needs ccrelay). ccrelay follow uninstall takes the hook out.\n", relayURL)
	}
	return nil
}

// followBlocked says what would keep a follower from relaying to relayURL
// (nil: nothing): the checks followSession makes before it follows.
func followBlocked(state, relayURL string) error {
	if _, err := relayToken("", "", "", state, relayURL, io.Discard); err != nil {
		return err
	}
	kr, err := openKeyring(state)
	if err != nil {
		return err
	}
	return checkPlaintext(relayURL, kr, false)
}

func followUninstall(out io.Writer) error {
	path, err := claudeSettingsPath()
	if err != nil {
		return err
	}
	res, err := hooksettings.Remove(path, "SessionStart", isFollowHook)
	if err != nil {
		return err
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(out, "No hook of ccrelay follow in %s: nothing to take out.\n", path)
	case res.Restored:
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(out, "Took the hook out: there was no %s before ccrelay follow install, and there is none again.\n", path)
			break
		}
		fmt.Fprintf(out, "Took the hook out: %s is as it was before ccrelay follow install.\n", path)
	default:
		fmt.Fprintf(out, "Took the hook out of %s; the rest changed since the install and is kept (the file as it was then: %s).\n", path, res.Backup)
	}
	return nil
}

// followLog opens the state folder's log, which the hook and the
// followers write to (never to Claude's terminal).
func followLog(state string) (*logfile.File, *slog.Logger, error) {
	f, err := stateLog(state)
	if err != nil {
		return nil, nil, err
	}
	return f, slog.New(slog.NewTextHandler(f, nil)).With("follow", true), nil
}

func newFollowHookCmd() *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:    "hook",
		Short:  "Claude Code's SessionStart hook of ccrelay follow install (used internally)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Never break Claude, nor write to its stdout (which Claude
			// would take as context): report in the log and succeed.
			if err := followHook(cmd.Context(), state, os.Stdin); err != nil {
				fmt.Fprintln(os.Stderr, "ccrelay follow:", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "state folder")
	return cmd
}

// followHook starts a follower of the session the hook reports, in the
// background, unless a ccrelay runs that Claude (it follows it) or no relay
// is set up.
func followHook(ctx context.Context, stateFlag string, in io.Reader) error {
	state, err := stateDir(stateFlag)
	if err != nil {
		return err
	}
	logFile, log, err := followLog(state)
	if err != nil {
		return err
	}
	defer logFile.Close()
	body, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return fmt.Errorf("read hook input: %w", err)
	}
	var s launcher.SessionStart
	if err := json.Unmarshal(body, &s); err != nil || !launcher.ValidSessionID(s.SessionID) {
		log.Warn("the SessionStart hook reported no session id", "body", string(body[:min(len(body), 200)]))
		return errors.New("the hook reported no session id")
	}
	if os.Getenv(launcher.EnvRelayed) != "" {
		log.Info("a ccrelay runs this Claude and relays the session: not followed", "session", s.SessionID)
		return nil
	}
	relayURL, _, err := chooseRelay("", state)
	if err != nil {
		log.Warn("session of plain claude not followed", "session", s.SessionID, "err", err)
		return err
	}
	if relayURL == "" {
		log.Info("session of plain claude not followed: no relay set up (ccrelay pair or ccrelay login)", "session", s.SessionID)
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find ccrelay's own path: %w", err)
	}
	pid := claudeProcess(log)
	args := []string{"follow", "session", "--session", s.SessionID, "--transcript", s.TranscriptPath, "--cwd", s.Cwd,
		"--pid", strconv.Itoa(pid), "--state", state}
	cmd := exec.Command(self, args...)
	cmd.Dir = s.Cwd
	if cmd.Dir == "" {
		cmd.Dir = state
	}
	// Nothing of Claude's: not its stdout, which Claude reads until every
	// holder closes it, nor its process group, which it may kill.
	cmd.SysProcAttr = detachedAttr()
	if err := logFile.Hold(func(f *os.File) error {
		// The follower's own log goes through its own File; what it
		// prints besides (a crash) goes to the log as it is now.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, f, f
		return cmd.Start()
	}); err != nil {
		return fmt.Errorf("start following the session: %w", err)
	}
	log.Info("following a session of plain claude", "session", s.SessionID, "source", s.Source, "claude", pid, "follower", cmd.Process.Pid)
	return cmd.Process.Release()
}

type followFlags struct {
	session, transcript, cwd, state string
	pid                             int
	flushTimeout                    time.Duration
}

func newFollowSessionCmd() *cobra.Command {
	var f followFlags
	cmd := &cobra.Command{
		Use:    "session",
		Short:  "Follow one session of plain claude until its Claude ends (started by the hook; used internally)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return followSession(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.session, "session", "", "the session")
	fl.StringVar(&f.transcript, "transcript", "", "its transcript, as the hook reported it")
	fl.StringVar(&f.cwd, "cwd", "", "its working directory")
	fl.StringVar(&f.state, "state", "", "state folder")
	fl.IntVar(&f.pid, "pid", 0, "its Claude's process id: followed until it ends")
	fl.DurationVar(&f.flushTimeout, "flush-timeout", followFlushTimeout, "how long the last send may take once Claude ended")
	return cmd
}

// Bounds of a follower.
const (
	// followPoll is how often a follower looks whether its Claude still
	// runs.
	followPoll = 500 * time.Millisecond
	// followFlushTimeout bounds the last send once Claude ended (by
	// default; --flush-timeout); what is not sent by then stays in the
	// outbox for the next ccrelay in the folder.
	followFlushTimeout = 30 * time.Second
)

// followLocks is the folder of the locks that make a session followed by
// one follower at a time.
func followLocks(state string) string { return filepath.Join(state, "follow") }

// followSession follows the transcript of one session of plain claude, as
// local mode does (the folder's state slot: its cursor, and what an earlier
// run left unsent, are taken over), announced as ModeFollowed, until its
// Claude ends or ctx does.
func followSession(ctx context.Context, f followFlags) error {
	if !launcher.ValidSessionID(f.session) {
		return fmt.Errorf("--session %q is not a session id", f.session)
	}
	if f.cwd == "" || !filepath.IsAbs(f.cwd) {
		return fmt.Errorf("--cwd %q is not an absolute folder", f.cwd)
	}
	state, err := stateDir(f.state)
	if err != nil {
		return err
	}
	logFile, log, err := followLog(state)
	if err != nil {
		return err
	}
	defer logFile.Close()
	log = log.With("session", f.session)
	if err := os.MkdirAll(followLocks(state), 0o700); err != nil {
		return err
	}
	lock, err := followLock(ctx, followLocks(state), f.session, f.pid)
	if err != nil {
		return err
	}
	if lock == nil {
		log.Info("the session is followed already")
		return nil
	}
	defer releaseFollowLock(lock)

	relayURL, _, err := chooseRelay("", state)
	if err != nil || relayURL == "" {
		log.Warn("not followed: no relay", "err", err)
		return err
	}
	if err := followBlocked(state, relayURL); err != nil {
		log.Warn("not followed", "err", err)
		return err
	}
	token, err := relayToken("", "", "", state, relayURL, logFile)
	if err != nil {
		return err
	}
	kr, err := openKeyring(state)
	if err != nil {
		return err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	projectDir, err := claude.ProjectDir(claude.ConfigDir(os.Getenv, home), f.cwd)
	if err != nil {
		return err
	}
	slot, err := launcher.ClaimRunDir(filepath.Join(state, "projects", claude.EscapeProjectPath(f.cwd)))
	if err != nil {
		return err
	}
	defer slot.Release()
	box, err := apiclient.OpenOutboxWith(filepath.Join(slot.Path, "outbox"), apiclient.OutboxOptions{Logger: log, Sealer: kr, Relay: relayURL})
	if err != nil {
		return err
	}
	defer box.Close()
	leftTurns := map[string]mapper.OpenTurn{}
	if _, err := slot.Leftovers(func(dir string) error {
		turns, err := launcher.ReadTurns(filepath.Join(dir, launcher.TurnsFile))
		if err != nil {
			log.Warn("could not read the turns an earlier run left open", "from", dir, "err", err)
		}
		maps.Copy(leftTurns, turns)
		_, err = box.Adopt(filepath.Join(dir, "outbox"))
		return err
	}); err != nil {
		log.Warn("could not take over what an earlier run left", "err", err)
	}
	client := apiclient.NewClient(apiclient.Config{URL: relayURL, Token: token, Logger: log, Notice: logFile, Keyring: kr}, box)
	sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
	sendDone := make(chan error, 1)
	go func() { sendDone <- client.Run(sendCtx) }()
	sendEnded := false
	defer func() {
		stopSend()
		if !sendEnded {
			<-sendDone
		}
	}()
	cmdsDone := make(chan struct{})
	go func() { defer close(cmdsDone); refuseCommands(sendCtx, client, log) }()
	defer func() { stopSend(); <-cmdsDone }()

	pipe := launcher.NewPipeline("", box)
	if err := pipe.KeepTurns(filepath.Join(slot.Path, launcher.TurnsFile), log); err != nil {
		log.Warn("could not read the turns an earlier run left open", "err", err)
	}
	pipe.AddOrphans(leftTurns)
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, CursorFile: filepath.Join(slot.Path, "cursor.json"), Logger: log,
		Notice: logFile, MissingTimeout: 24 * time.Hour}, pipe)
	if err != nil {
		return err
	}
	scanCtx, stopScan := context.WithCancel(context.WithoutCancel(ctx))
	scanDone := make(chan error, 1)
	go func() { scanDone <- sc.Run(scanCtx) }()
	sc.AddSessionPath(f.session, f.transcript)
	client.Announce(f.session, sessionInfo(f.cwd, launcher.SessionState{Mode: ModeFollowed, Status: launcher.StatusIdle}))
	modelsDone := make(chan struct{})
	go func() { defer close(modelsDone); announceModels(scanCtx, client, pipe, f.session, f.cwd) }()
	log.Info("following", "cwd", f.cwd, "claude", f.pid, "relay", relayURL)

	exited := waitExited(ctx, f.pid)
	stopScan()
	scanErr := <-scanDone
	<-modelsDone
	if exited {
		if err := pipe.Close(context.WithoutCancel(ctx), protocol.StatusCompleted, time.Now().UnixMilli()); err != nil {
			return err
		}
	} else {
		// Stopped while Claude runs on (it is not this process's child):
		// the turn it is in goes on in its transcript, and is not ended
		// here. It stays in the slot's turns file with the cursor, and the
		// next follower of the session takes it up where the transcript
		// has it, as after a kill.
		log.Info("stopped while its Claude runs; the open turn is kept for the next follower")
	}
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.flushTimeout)
	defer cancel()
	if err := client.Flush(flushCtx); err != nil {
		log.Warn("not all sent; kept for the next ccrelay in this folder", "pending", box.Pending(), "in", slot.Path, "err", err)
	} else {
		log.Info("Claude ended; the session is sent")
	}
	stopSend()
	sendEnded = true
	if err := <-sendDone; err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("relay", "err", err)
	}
	return scanErr
}

// announceModels announces the followed session again, with its model,
// each time the model its transcript's assistant records name changes
// (plain claude tells none otherwise, and the app prices usage by it),
// until ctx ends.
func announceModels(ctx context.Context, client appSender, pipe *launcher.Pipeline, session, cwd string) {
	announced := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-pipe.ModelChanged():
			if m := pipe.Model(session); m != announced {
				announced = m
				client.Announce(session, sessionInfo(cwd, launcher.SessionState{Mode: ModeFollowed, Status: launcher.StatusIdle, Model: m}))
			}
		}
	}
}

// refuseCommands answers every command from the app: a followed session
// takes none.
func refuseCommands(ctx context.Context, client *apiclient.Client, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-client.Commands():
			log.Info("refused a command from the app: the session is only followed", "id", in.Command.ID, "kind", in.Command.Kind)
			if err := client.Reply(ctx, in.Session, in.Command.ID, false, fmt.Sprintf(followRejected, in.Session)); err != nil {
				log.Warn("could not answer a command", "id", in.Command.ID, "err", err)
			}
		}
	}
}

// stillRuns reports whether the process pid runs and is the one that
// started at start ("": not known).
func stillRuns(pid int, start string) bool {
	return processAlive(pid) && (start == "" || processStart(pid) == start)
}

// waitExited returns once the process pid has ended (pid 0: at once),
// true, or when ctx ends while it runs, false; a process that took its pid
// after it ended is not waited for.
func waitExited(ctx context.Context, pid int) bool {
	start := processStart(pid)
	t := time.NewTicker(followPoll)
	defer t.Stop()
	for pid > 0 && stillRuns(pid, start) {
		select {
		case <-ctx.Done():
			return !stillRuns(pid, start)
		case <-t.C:
		}
	}
	return true
}
