package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/dirs"
	"github.com/ccrelay/ccrelay/internal/orphans"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

type localFlags struct {
	claude     string
	state      string
	out        string
	relay      string
	relayToken string
	tokenFile  string
	remote     bool
	session    string
	// allowBypass lets the app switch Claude to bypassPermissions.
	allowBypass bool
	// plaintext sends to a relay on another machine although no device is
	// paired with this machine (nothing sealed).
	plaintext bool
	// daemonPipe (hidden, with --remote): started by `ccrelay daemon`,
	// whose messages come on stdin (daemonStart first); stdin's end means
	// the daemon is gone, and the session ends with it. startedBy is the
	// daemon's session, announced with this one's.
	daemonPipe bool
	startedBy  string
}

func addLocalFlags(cmd *cobra.Command, f *localFlags) {
	cmd.Flags().StringVar(&f.claude, "claude", "claude", "the claude binary to run")
	cmd.Flags().StringVar(&f.state, "state", "", "state folder: cursors, outbox and log (default $XDG_STATE_HOME/ccrelay; %LocalAppData%\\ccrelay\\state on Windows)")
	cmd.Flags().StringVar(&f.out, "out", "", "with no relay, append the envelopes to this one JSONL file (default: one file per session in <state>/projects/<folder>/sessions; ignored with --relay)")
	cmd.Flags().StringVar(&f.relay, "relay", "", "send the session to the relay at this URL (default $CCRELAY_RELAY, or the relay ccrelay pair or ccrelay login remembered)")
	cmd.Flags().StringVar(&f.relayToken, "relay-token", "", "the relay's token (visible in ps: prefer --relay-token-file; default $CCRELAY_TOKEN, or the token of a relay on this machine)")
	cmd.Flags().StringVar(&f.tokenFile, "relay-token-file", "", "read the relay's token from this file (mode 0600)")
	cmd.Flags().BoolVar(&f.remote, "remote", false, "start headless, without a terminal: a new session driven from the app (needs --relay)")
	cmd.Flags().StringVar(&f.session, "session", "", "with --remote: the session id to create or continue (default: a new one)")
	cmd.Flags().BoolVar(&f.allowBypass, "allow-bypass-from-app", false, "let the app switch Claude to bypassPermissions (every tool runs without asking); off, the app cannot")
	cmd.Flags().BoolVar(&f.plaintext, "plaintext", false, "send to a relay on another machine even when no device is paired with this machine (the relay can read the session)")
	cmd.Flags().BoolVar(&f.daemonPipe, "daemon-pipe", false, "started by ccrelay daemon: its messages come on stdin, and the session ends when stdin does")
	cmd.Flags().StringVar(&f.startedBy, "started-by", "", "the daemon session that started this one")
	_ = cmd.Flags().MarkHidden("daemon-pipe")
	_ = cmd.Flags().MarkHidden("started-by")
}

func stateDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return platformDir(dirs.State, "state")
}

// runPlace is where a run in this terminal works: its state folder (flag,
// or the platform's), the current folder and the user's home.
func runPlace(stateFlag string) (state, cwd, home string, err error) {
	if state, err = stateDir(stateFlag); err != nil {
		return "", "", "", err
	}
	if cwd, err = os.Getwd(); err != nil {
		return "", "", "", err
	}
	if home, err = os.UserHomeDir(); err != nil {
		return "", "", "", err
	}
	return state, cwd, home, nil
}

// runLocal is local mode: interactive Claude in this terminal, its
// transcripts followed by the scanner and mapped into the outbox.
func runLocal(cmd *cobra.Command, f *localFlags, claudeArgs []string) error {
	ctx := cmd.Context()
	state, cwd, home, err := runPlace(f.state)
	if err != nil {
		return err
	}
	projectDir, err := claude.ProjectDir(claude.ConfigDir(os.Getenv, home), cwd)
	if err != nil {
		return err
	}
	// The folder's state; this process's cursor, outbox and hook folder
	// are in a slot of it that no other ccrelay uses while this one runs.
	folderState := filepath.Join(state, "projects", claude.EscapeProjectPath(cwd))
	slot, err := launcher.ClaimRunDir(folderState)
	if err != nil {
		return err
	}
	defer slot.Release()
	runDir := slot.Path
	// The terminal belongs to Claude: ccrelay logs to a file.
	logFile, err := stateLog(state)
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, nil))
	if slot.StaleHookDirs > 0 || slot.StaleErr != nil {
		log.Info("removed the hook folders a killed run left in the state folder", "dir", runDir, "removed", slot.StaleHookDirs,
			"err", slot.StaleErr)
	}
	claudeVersion, versionWarning := checkClaudeVersion(ctx, f.claude, log, os.Stderr)

	// --relay, $CCRELAY_RELAY, or the relay ccrelay pair or login
	// remembered; --out alone records to that file.
	if f.out == "" || f.relay != "" {
		if f.relay, _, err = chooseRelay(f.relay, state); err != nil {
			return err
		}
	}
	if f.remote && f.relay == "" {
		return errors.New("--remote needs a relay, as the prompts come from the app: run ccrelay setup (or ccrelay login) once, or give --relay URL")
	}
	if f.session != "" && !launcher.ValidSessionID(f.session) {
		return fmt.Errorf("--session %q is not a session id (a UUID, as Claude Code makes them)", f.session)
	}
	if f.remote {
		// --resume ID (what the exit hint suggests) continues that
		// session, the one the app shows, not a new one.
		id, err := launcher.RemoteResumeTarget(claudeArgs)
		if err != nil {
			return err
		}
		if id != "" && f.session != "" && id != f.session {
			return fmt.Errorf("--session %s and --resume %s name two sessions", f.session, id)
		}
		if id != "" {
			if !hasTranscript(home, cwd, projectDir, id) {
				return fmt.Errorf("Claude Code has no session %s in this folder (%s): --resume continues a session where it ran (--session %s would start one here under that id)", id, cwd, id)
			}
			f.session = id
		}
	}
	if f.daemonPipe && !f.remote {
		return errors.New("--daemon-pipe needs --remote")
	}
	if f.startedBy != "" && !launcher.ValidSessionID(f.startedBy) {
		return fmt.Errorf("--started-by %q is not a session id", f.startedBy)
	}
	// What the daemon that started this session asks (read before anything
	// starts: it writes it at once).
	var fromDaemon daemonStart
	var daemonIn *bufio.Reader
	if f.daemonPipe {
		if f.session == "" {
			return errors.New("--daemon-pipe needs --session")
		}
		// ccrelay attach finds this session's ccrelay by this lock.
		release, err := holdRunning(state, f.session)
		if err != nil {
			return err
		}
		defer release()
		daemonIn = bufio.NewReader(os.Stdin)
		if fromDaemon, err = readDaemonStart(daemonIn); err != nil {
			return err
		}
	}
	var out launcher.Outbox
	// The turns runs that ended in other slots left open (their slot is
	// removed once taken over).
	leftTurns := map[string]mapper.OpenTurn{}
	takeTurns := func(dir string) error {
		turns, err := launcher.ReadTurns(filepath.Join(dir, launcher.TurnsFile))
		if err != nil {
			log.Warn("could not read the turns an earlier run left open", "from", dir, "err", err)
		}
		maps.Copy(leftTurns, turns)
		return nil
	}
	var app *appLink // the link to the app, with --relay
	// refused is closed when the relay refuses the token (with --relay).
	var refused chan struct{}
	// The relay client's notices reach the terminal before and after
	// Claude, never over its screen.
	gate := &noticeGate{out: os.Stderr, log: log}
	// So do the scanner's (Claude's transcripts cannot be watched, and
	// are again), apart from the relay's.
	scanGate := &noticeGate{out: os.Stderr, log: log, kind: "scanner notice"}
	var scanning atomic.Pointer[scanner.Scanner] // the scanner, once made, for the status line
	// The session Claude runs (the hook's), for the resume hint at exit.
	tracker := &sessionTracker{}
	var startLine string // said once, before Claude starts
	var statusLine *launcher.StatusLine
	if f.relay != "" {
		// Sessions are sealed for the devices this machine trusts.
		rr, err := openRelayRun(f.relay, f.relayToken, f.tokenFile, f.plaintext, state, runDir, log)
		if err != nil {
			return err
		}
		token, kr, box := rr.token, rr.kr, rr.box
		defer box.Close()
		ledger, err := launcher.OpenLedger(filepath.Join(runDir, "commands.jsonl"))
		if err != nil {
			return err
		}
		defer ledger.Close()
		// What a ccrelay that ended in another slot did not send goes
		// with this one's; its slot is removed.
		if _, err := slot.Leftovers(func(dir string) error {
			if err := takeTurns(dir); err != nil {
				return err
			}
			n, err := box.Adopt(filepath.Join(dir, "outbox"))
			if n > 0 {
				log.Info("took over unsent envelopes of an earlier run", "from", dir, "envelopes", n)
			}
			return err
		}); err != nil {
			log.Warn("could not take over what an earlier run left", "err", err)
		}
		tellHeld(os.Stderr, box)
		sender := apiclient.NewClient(apiclient.Config{URL: f.relay, Token: token, Logger: log, Notice: gate, Keyring: kr}, box)
		app = &appLink{sender: sender, ledger: ledger, cwd: cwd, log: log, cmds: make(chan launcher.Command), known: make(chan struct{}), forkParent: launcher.ForkParent(claudeArgs),
			claudeVersion: claudeVersion, versionWarning: versionWarning, startedBy: f.startedBy, machine: fromDaemon.Machine}
		// Claude names its project folder after the working directory
		// with symbolic links resolved.
		transcriptDir := projectDir
		if real, err := filepath.EvalSymlinks(cwd); err == nil {
			if d, err := claude.ProjectDir(claude.ConfigDir(os.Getenv, home), real); err == nil {
				transcriptDir = d
			}
		}
		app.transcript = func(session string) string { return claude.TranscriptPath(transcriptDir, session) }
		sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
		sendDone, appDone := make(chan error, 1), make(chan struct{})
		refused = make(chan struct{})
		go func() {
			err := sender.Run(sendCtx)
			if errors.Is(err, apiclient.ErrUnauthorized) {
				close(refused)
			}
			sendDone <- err
		}()
		go func() { defer close(appDone); app.run(sendCtx) }()
		// Claude's status line shows the relay's state (ccrelay statusline).
		statusLine = &launcher.StatusLine{StatusFile: filepath.Join(runDir, "status.json")}
		statusDone := make(chan struct{})
		go func() {
			defer close(statusDone)
			keepStatus(sendCtx, statusLine.StatusFile, sender, box, func() bool {
				sc := scanning.Load()
				return sc != nil && sc.Polled()
			}, log)
		}()
		defer func() { <-statusDone }()
		defer func() {
			// What is left goes to the relay for a bounded, visible
			// moment that Ctrl-C cuts short; the outbox keeps the rest.
			gate.release()
			ex := exitFlush{sender: sender, box: box, sendDone: sendDone, url: f.relay, gate: gate, out: os.Stderr,
				timeout: exitFlushTimeout, keptIn: runDir}
			ex.run()
			stopSend()
			<-appDone
			if !ex.ended {
				<-sendDone
			}
			tracker.hint(os.Stderr)
		}()
		out = box
		host, _ := os.Hostname()
		if fromDaemon.Machine != "" {
			host = fromDaemon.Machine
		}
		startLine = fmt.Sprintf("ccrelay: relaying to %s as %s", f.relay, host)
	} else {
		var fo *launcher.FileOutbox
		recording := f.out
		if f.out != "" {
			fo, err = launcher.OpenFileOutbox(f.out)
		} else {
			// One file per session, in the folder's state: nothing of
			// other folders or sessions is read at start.
			recording = filepath.Join(folderState, "sessions")
			fo, err = launcher.OpenSessionOutbox(recording)
		}
		if err != nil {
			return err
		}
		defer fo.Close()
		defer tracker.hint(os.Stderr)
		startLine = fmt.Sprintf("ccrelay: no relay set up: recording to %s; run ccrelay setup (or ccrelay login) once to reach a phone", recording)
		// Slots of runs that ended hold only their cursor: removed.
		if _, err := slot.Leftovers(takeTurns); err != nil {
			log.Warn("could not remove what an earlier run left", "err", err)
		}
		out = fo
	}
	pipe := launcher.NewPipeline("", out)
	// The turn each session had open when an earlier run stopped (and its
	// Claude with it) ends before anything else of that session.
	if err := pipe.KeepTurns(filepath.Join(runDir, launcher.TurnsFile), log); err != nil {
		log.Warn("could not read the turns an earlier run left open", "err", err)
	}
	pipe.AddOrphans(leftTurns)
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, CursorFile: filepath.Join(runDir, "cursor.json"), Logger: log,
		Notice: scanGate}, pipe)
	if err != nil {
		return err
	}
	scanning.Store(sc)
	scanCtx, stopScan := context.WithCancel(context.WithoutCancel(ctx))
	scanDone := make(chan error, 1)
	go func() { scanDone <- sc.Run(scanCtx) }()

	self, err := os.Executable()
	if err != nil {
		stopScan()
		<-scanDone
		return fmt.Errorf("find ccrelay's own path for the hook: %w", err)
	}
	tracker.Scanner = sc
	if statusLine != nil {
		statusLine.Command = []string{self, "statusline"}
	}
	loopOpts := launcher.LoopOptions{
		Local: launcher.LocalOptions{Claude: f.claude, Args: claudeArgs, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
			HookCommand: []string{self, "hook"}, HookDir: runDir, StatusLine: statusLine, Logger: log},
		Remote:   launcher.RemoteOptions{AllowBypass: f.allowBypass},
		Pipeline: pipe, Scanner: tracker, Logger: log, Notice: os.Stderr,
	}
	// Ctrl-C belongs to Claude in local mode (RunLocal forwards it); only
	// SIGTERM and SIGHUP end the loop. Headless, Ctrl-C ends it too.
	// Claude gets the signal itself (SIGHUP ends it with 129), not SIGTERM.
	loopCtx, stopLoop := signalContext(context.WithoutCancel(ctx), syscall.SIGTERM, syscall.SIGHUP)
	defer stopLoop()
	if f.daemonPipe {
		// Stopped from the app, or its daemon gone: Claude is not waited
		// for (a tool may run for minutes), it gets daemonStopTimeout.
		loopOpts.Remote.StopTimeout = daemonStopTimeout
	}
	if f.remote {
		loopCtx = ctx
		loopOpts.StartRemote = true
		loopOpts.Session = f.session
		if loopOpts.Session == "" {
			loopOpts.Session = claude.NewSessionID()
		} else if _, err := os.Stat(claude.TranscriptPath(projectDir, f.session)); err == nil {
			loopOpts.Resume = true // Claude Code has it: continued
		}
	} else if term.IsTerminal(int(os.Stdin.Fd())) {
		loopOpts.Keys = os.Stdin
	}
	// Headless, the session lives by the app: a relay that refuses the
	// token ends it (nothing could ever come from the app).
	var refusedCtx context.Context
	if f.remote && refused != nil {
		var cancel context.CancelCauseFunc
		loopCtx, cancel = context.WithCancelCause(loopCtx)
		refusedCtx = loopCtx
		watchDone := make(chan struct{})
		go func() {
			defer close(watchDone)
			select {
			case <-refused:
				cancel(apiclient.ErrUnauthorized)
			case <-refusedCtx.Done():
			}
		}()
		defer func() { cancel(nil); <-watchDone }()
	}
	if app != nil {
		loopOpts.Events, loopOpts.Commands = app, app.cmds
		if f.remote {
			// The session is visible to the app at once, before any
			// Claude runs (it starts on the first prompt).
			app.State(loopOpts.Session, launcher.SessionState{Mode: "remote", Status: launcher.StatusIdle})
			fmt.Fprintf(os.Stderr, "ccrelay: session %s is waiting for a prompt from the app (%s)\n", loopOpts.Session, f.relay)
		}
	}
	fmt.Fprintln(os.Stderr, startLine)
	if !f.remote {
		gate.hold() // the terminal is Claude's until it exits
		scanGate.hold()
	}
	var daemonEnd func() error
	daemonCut := false // the open turn ended with the daemon's note
	if f.daemonPipe {
		var stopWatch func()
		// What Claude's commands leave running when Claude is stopped (a
		// Bash command runs in a session of its own, which Claude's death
		// hands to init) comes to this process, which ends it.
		adopt := func() {
			if err := orphans.Adopt(); err != nil {
				log.Warn("what Claude's commands leave running may outlive the session", "err", err)
			}
		}
		loopCtx, daemonEnd, stopWatch = watchDaemon(loopCtx, daemonIn, os.Stdin, adopt)
		defer stopWatch()
		// The turn Claude was in the middle of ends with the note, as
		// the resumed Claude's repair of it does (failed when the daemon
		// died), not cancelled with a note in a turn of its own after it.
		loopOpts.StopCut = func() (mapper.Cut, bool) {
			why := daemonEnd()
			if why == nil {
				return mapper.Cut{}, false
			}
			note, status := daemonNote(why)
			return mapper.Cut{Status: status, Result: daemonCutResult, Note: note}, true
		}
		loopOpts.Stopped = func(cut bool) { daemonCut = cut }
		if fromDaemon.Prompt != "" {
			firstCtx, cancelFirst := context.WithCancel(loopCtx)
			firstDone := make(chan struct{})
			defer func() { cancelFirst(); <-firstDone }()
			go func() {
				defer close(firstDone)
				app.first(firstCtx, fromDaemon.Prompt)
			}()
		}
	}
	code, runErr := launcher.RunLoop(loopCtx, loopOpts)
	if refusedCtx != nil && errors.Is(context.Cause(refusedCtx), apiclient.ErrUnauthorized) && runErr == nil {
		runErr = fmt.Errorf("the relay at %s refused the token (wrong or revoked), so no prompt can come from the app: run ccrelay login again (with a code from ccrelay pair --machine), or give the right --relay-token-file", f.relay)
	}
	gate.release()
	scanGate.release()
	if daemonEnd != nil && daemonEnd() != nil {
		// The app asked the daemon to stop this session, or the daemon
		// that started it stopped (or was killed): the session ends and
		// says why.
		why := daemonEnd()
		note, status := daemonNote(why)
		exit := 0
		if errors.Is(why, errDaemonGone) {
			exit = 1
		}
		fmt.Fprintln(os.Stderr, "ccrelay:", why)
		if n, err := orphans.End(orphansTimeout); n > 0 || err != nil {
			log.Info("ended what Claude's commands left running", "processes", n, "err", err)
		}
		stopScan()
		<-scanDone
		now := time.Now().UnixMilli()
		bg := context.WithoutCancel(ctx)
		if !daemonCut {
			// No turn was open: the note says why in a turn of its own.
			if err := pipe.Note(bg, loopOpts.Session, protocol.New(), note, now); err != nil {
				return err
			}
		}
		if err := pipe.Close(bg, status, now); err != nil {
			return err
		}
		app.State(loopOpts.Session, launcher.SessionState{Mode: "remote", Status: launcher.StatusIdle, Error: note})
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			return runErr
		}
		if exit != 0 {
			return &exitError{code: exit}
		}
		return nil
	}
	// Claude is gone: read what it wrote last, close the turn, flush.
	stopScan()
	scanErr := <-scanDone
	if runErr != nil {
		return runErr
	}
	status := protocol.StatusCompleted
	if code != 0 {
		status = protocol.StatusFailed
	}
	if err := pipe.Close(context.WithoutCancel(ctx), status, time.Now().UnixMilli()); err != nil {
		return err
	}
	if scanErr != nil {
		return scanErr
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func newHookCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "hook HOOK_FILE",
		Short:  "Forward Claude's SessionStart hook to the ccrelay that started it (used internally)",
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := ""
			if len(args) > 0 {
				file = args[0]
			}
			if err := launcher.ForwardHook(cmd.Context(), os.Stdin, file); err != nil {
				// Never break Claude: report and succeed.
				fmt.Fprintln(os.Stderr, "ccrelay hook:", err)
			}
			return nil
		},
	}
}

// sessionInfo is the description of a session announced to the relay:
// where it runs, and its state.
func sessionInfo(cwd string, st launcher.SessionState) json.RawMessage {
	return sessionInfoWith(cwd, st, "", "")
}

// appSender is what appLink needs of the relay client.
type appSender interface {
	Commands() <-chan apiclient.Inbound
	Announce(session string, info json.RawMessage)
	Live(session string, payload json.RawMessage)
	Reply(ctx context.Context, session, id string, ok bool, message string) error
}

// appLink connects the session loop with the relay: state and live deltas
// out, the app's commands in (each answered with its outcome).
type appLink struct {
	sender appSender
	ledger *launcher.Ledger // each command's outcome: a repeat is answered, never run again
	// transcript is where Claude writes a session's transcript (nil: not
	// known): a prompt an earlier run began is done if Claude took it.
	transcript func(session string) string
	claimed    map[string]bool // records found for such prompts (run's)
	cwd        string
	log        *slog.Logger
	cmds       chan launcher.Command
	// claudeVersion and versionWarning go into every session info.
	claudeVersion, versionWarning string
	// startedBy is the daemon session that started this one ("": none),
	// and machine the name its daemon announces ("": the host name).
	startedBy, machine string

	// forkParent is the session the user's arguments fork (--resume ID
	// --fork-session), and forkChild the fork, once Claude runs it.
	forkParent, forkChild string

	mu      sync.Mutex
	current string // the session the loop runs now
	// known is closed by the first State: until then no command is taken,
	// since none can be judged against the session the loop runs (the
	// relay hands a CLI its session's commands as soon as the outbox sends
	// that session's envelopes, before the loop says what it runs).
	known     chan struct{}
	knownOnce sync.Once
}

func (a *appLink) State(session string, st launcher.SessionState) {
	a.mu.Lock()
	a.current = session
	if a.forkParent != "" && a.forkChild == "" && session != a.forkParent {
		a.forkChild = session // the first session Claude runs is the fork
	}
	forkedFrom := ""
	if session == a.forkChild {
		forkedFrom = a.forkParent
	}
	a.mu.Unlock()
	a.knownOnce.Do(func() { close(a.known) })
	info := sessionInfoFork(a.cwd, st, a.claudeVersion, a.versionWarning, forkedFrom)
	if a.startedBy != "" || a.machine != "" {
		var m map[string]any
		if json.Unmarshal(info, &m) == nil {
			if a.startedBy != "" {
				m["startedBy"] = a.startedBy
			}
			if a.machine != "" {
				m["machine"] = a.machine
			}
			info, _ = json.Marshal(m)
		}
	}
	a.sender.Announce(session, info)
}

func (a *appLink) Live(session string, payload json.RawMessage) { a.sender.Live(session, payload) }

// run hands the app's commands to the loop until ctx ends.
func (a *appLink) run(ctx context.Context) {
	select {
	case <-a.known:
	case <-ctx.Done():
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-a.sender.Commands():
			a.mu.Lock()
			cur := a.current
			a.mu.Unlock()
			send := func(err error) {
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				if rerr := a.sender.Reply(ctx, in.Session, in.Command.ID, err == nil, msg); rerr != nil {
					a.log.Warn("could not answer a command; the answer is sent again on the next connection", "id", in.Command.ID, "err", rerr)
				}
			}
			a.log.Info("command from the app", "session", in.Session, "id", in.Command.ID, "kind", in.Command.Kind)
			var fresh bool
			var outcome, lerr error
			if in.Command.Kind == protocol.CommandPrompt && a.transcript != nil {
				fresh, outcome, lerr = a.ledger.BeginPrompt(in.Command.ID, fileSize(a.transcript(in.Session)))
			} else {
				fresh, outcome, lerr = a.ledger.Begin(in.Command.ID)
			}
			switch {
			case lerr != nil:
				// Not recorded: not carried out either (it could run twice).
				send(fmt.Errorf("ccrelay could not record the command: %w", lerr))
				continue
			case !fresh && errors.Is(outcome, launcher.ErrInProgress):
				continue // its answer follows when it ends
			case !fresh && errors.Is(outcome, launcher.ErrInterrupted) && in.Command.Kind == protocol.CommandPrompt && a.tookIt(in):
				// An earlier run wrote it to Claude and ended before its
				// answer: Claude took it, so it is done (never run again).
				if lerr := a.ledger.Finish(in.Command.ID, nil); lerr != nil {
					a.log.Error("could not record a command's outcome", "id", in.Command.ID, "err", lerr)
				}
				send(nil)
				continue
			case !fresh:
				send(outcome) // a repeat: the recorded outcome
				continue
			}
			reply := func(err error) {
				if lerr := a.ledger.Finish(in.Command.ID, err); lerr != nil {
					a.log.Error("could not record a command's outcome", "id", in.Command.ID, "err", lerr)
				}
				send(err)
			}
			if in.Session != cur {
				reply(errors.New("this session is no longer running here; use the current one"))
				continue
			}
			select {
			case a.cmds <- launcher.Command{Command: in.Command, Reply: reply}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// hasTranscript reports whether Claude Code has a transcript of session
// in the folder cwd (projectDir as named, or the folder of cwd with
// symbolic links resolved, as Claude names it).
func hasTranscript(home, cwd, projectDir, session string) bool {
	dirs := []string{projectDir}
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		if d, err := claude.ProjectDir(claude.ConfigDir(os.Getenv, home), real); err == nil {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(claude.TranscriptPath(d, session)); err == nil {
			return true
		}
	}
	return false
}

// tookIt reports whether Claude took the prompt in, which an earlier run
// began and never finished: the session's transcript holds it past where
// it stood then, in a record no other such prompt was found in. Called by
// run.
func (a *appLink) tookIt(in apiclient.Inbound) bool {
	at, ok := a.ledger.StartedAt(in.Command.ID)
	if !ok || a.transcript == nil {
		return false
	}
	if a.claimed == nil {
		a.claimed = map[string]bool{}
	}
	uuid := launcher.PromptTaken(a.transcript(in.Session), at, in.Command.Text, func(u string) bool { return a.claimed[u] })
	if uuid == "" {
		return false
	}
	if len(a.claimed) < launcher.MaxLedgerEntries {
		a.claimed[uuid] = true
	}
	return true
}

// fileSize is the size of the file at path, 0 when there is none.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// signalContext is signal.NotifyContext whose cause (context.Cause) is a
// launcher.SignalCause naming the signal that ended it.
func signalContext(parent context.Context, sigs ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-ch:
			cancel(launcher.SignalCause{Signal: s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
		<-done
	}
}

// statusEvery is how often the relay's state is looked at for Claude's
// status line; the file is rewritten only when it changed.
const statusEvery = 500 * time.Millisecond

// keepStatus keeps the status file in step with the relay link until ctx
// ends.
func keepStatus(ctx context.Context, file string, sender *apiclient.Client, box *apiclient.Outbox, polled func() bool, log *slog.Logger) {
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	var last *launcher.RelayStatus
	for {
		st := launcher.RelayStatus{Connected: sender.Connected(), Unsent: box.Pending(), Refused: sender.Refused(), Polled: polled()}
		if last == nil || st != *last {
			if err := launcher.WriteStatus(file, st); err != nil {
				log.Warn("could not write the status line's state", "err", err)
			}
			last = &st
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// exitFlushTimeout bounds how long ccrelay waits, once Claude has exited,
// for the relay to acknowledge what is unsent; Ctrl-C cuts it short. The
// outbox keeps what is left for the next ccrelay in the folder.
const exitFlushTimeout = 5 * time.Second

// exitFlush is the last send at exit: it says what it waits for, stops at
// the timeout or at a signal (Ctrl-C), and names the reason when something
// stays unsent.
type exitFlush struct {
	sender   *apiclient.Client
	box      *apiclient.Outbox
	sendDone chan error // sender.Run's result
	url      string
	gate     *noticeGate
	out      io.Writer
	timeout  time.Duration
	keptIn   string
	ended    bool // sendDone was read
}

func (x *exitFlush) run() {
	// A Ctrl-C pressed from now on is ccrelay's: Claude is gone.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if x.sender.Settled() {
		return
	}
	// Only the session's last state or a command's answer is left: waited
	// for as long, without a word, while the relay is connected (there is
	// nothing to keep for later).
	quiet := x.box.Pending() == 0
	if quiet && !x.sender.Connected() {
		return
	}
	refused := func() {
		if quiet {
			return
		}
		fmt.Fprintf(x.out, "ccrelay: not sent: the relay at %s refused the token (wrong or revoked); %s kept in %s for a run with the right token\n",
			x.url, size(x.box.Pending()), x.keptIn)
	}
	select {
	case err := <-x.sendDone:
		x.ended = true
		if errors.Is(err, apiclient.ErrUnauthorized) {
			refused()
			return
		}
	default:
	}
	if !quiet {
		fmt.Fprintf(x.out, "ccrelay: sending the last %s to the relay (up to %s; Ctrl-C stops, it is kept for the next run)\n",
			size(x.box.Pending()), x.timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.timeout)
	defer cancel()
	flushed := make(chan error, 1)
	go func() { flushed <- x.sender.Flush(ctx) }()
	var stopped os.Signal
	for {
		select {
		case err := <-flushed:
			if quiet {
				return
			}
			if err == nil {
				fmt.Fprintln(x.out, "ccrelay: sent.")
				return
			}
			fmt.Fprintf(x.out, "ccrelay: not sent: %s; %s kept in %s and sent by the next ccrelay in this folder\n",
				x.reason(stopped), size(x.box.Pending()), x.keptIn)
			return
		case err := <-x.sendDone:
			x.ended = true
			if errors.Is(err, apiclient.ErrUnauthorized) {
				cancel()
				<-flushed
				refused()
				return
			}
		case stopped = <-sigs:
			cancel()
		}
	}
}

// reason says why the relay did not take everything: what happened to
// the attempt to talk to it. A relay that took the connection was reached,
// and did not answer.
func (x *exitFlush) reason(stopped os.Signal) string {
	stage, since := x.sender.Attempt()
	silent := time.Since(since).Round(100 * time.Millisecond)
	why := ""
	switch {
	case x.sender.Connected():
		why = "the relay at " + x.url + " did not confirm what was sent within " + x.timeout.String()
	case stage == apiclient.StageUpgraded:
		why = "the relay at " + x.url + " accepted the websocket but answered nothing on it for " + silent.String() +
			" (is the relay, or a proxy in front of it, stuck?)"
	case stage == apiclient.StageTaken:
		why = "the relay at " + x.url + " took the connection but did not answer it for " + silent.String() +
			" (is that the relay's address, and is the relay or a proxy in front of it stuck?)"
	case x.gate.lastUnreachable() != "":
		why = x.gate.lastUnreachable()
	default:
		why = "the relay at " + x.url + " was not reached"
	}
	if stopped != nil {
		why = "stopped (" + stopped.String() + "); " + why
	}
	return why
}

// size says n bytes in a few characters.
func size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// noticeGate passes notices (the relay client's, the scanner's) to the
// terminal, except while Claude has it (hold): then they go to the log,
// and the last one is shown once Claude has exited (release).
type noticeGate struct {
	out  io.Writer
	log  *slog.Logger
	kind string // what the log calls a notice ("": relay notice)

	mu          sync.Mutex
	held        bool
	pending     string // the last notice held
	unreachable string // why the relay could not be reached, until it is
}

func (g *noticeGate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	line := strings.TrimSpace(string(p))
	// The client's notice that the relay cannot be reached names the
	// reason before "; retrying"; a notice that it was reached clears it.
	if why, ok := strings.CutPrefix(line, "ccrelay: cannot reach "); ok {
		why, _, _ = strings.Cut(why, "; retrying")
		g.unreachable = "cannot reach " + why
	} else if strings.HasPrefix(line, "ccrelay: reached ") {
		g.unreachable = ""
	}
	kind := g.kind
	if kind == "" {
		kind = "relay notice"
	}
	g.log.Info(kind, "notice", line, "held until Claude exits", g.held)
	if g.held {
		g.pending = line
		return len(p), nil
	}
	return g.out.Write(p)
}

func (g *noticeGate) hold() {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
}

func (g *noticeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held && g.pending != "" {
		fmt.Fprintln(g.out, g.pending)
	}
	g.held, g.pending = false, ""
}

func (g *noticeGate) lastUnreachable() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unreachable
}

// sessionTracker is the loop's scanner, remembering the session Claude
// announced last: ccrelay's resume hint names it.
type sessionTracker struct {
	launcher.Scanner
	mu      sync.Mutex
	session string
}

func (t *sessionTracker) AddSessionPath(id, transcriptPath string) {
	t.mu.Lock()
	t.session = id
	t.mu.Unlock()
	t.Scanner.AddSessionPath(id, transcriptPath)
}

// hint tells how to go on with the session relayed: Claude's own hint
// names claude and a settings file that is gone.
func (t *sessionTracker) hint(w io.Writer) {
	t.mu.Lock()
	id := t.session
	t.mu.Unlock()
	if id != "" {
		fmt.Fprintf(w, "ccrelay: to go on with this session: ccrelay --resume %s\n", id)
	}
}
