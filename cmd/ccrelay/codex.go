package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

type codexFlags struct {
	codex      string
	state      string
	out        string
	relay      string
	relayToken string
	tokenFile  string
	plaintext  bool
	// Remote mode (runCodexRemote): a session driven from the app, headless;
	// daemonPipe and startedBy as for Claude's (ccrelay daemon starts it).
	remote     bool
	session    string
	daemonPipe bool
	startedBy  string
	// reportFD (with --daemon-pipe) is the descriptor of the daemon's
	// report pipe: the session reports its thread's id there.
	reportFD int
}

// runCodexRemote is remote mode for Codex (ccrelay codex --remote): Codex
// driven through its app server, prompts and approvals from the app. Set
// by the file that implements it; nil, --remote is refused.
var runCodexRemote func(ctx context.Context, f *codexFlags, codexArgs []string) error

func newCodexCmd() *cobra.Command {
	var f codexFlags
	cmd := &cobra.Command{
		Use:   "codex [flags] [codex options and arguments]",
		Short: "Run the Codex CLI in this terminal, relayed",
		Long: "ccrelay codex runs OpenAI's Codex CLI in this terminal as codex would run with the same arguments,\n" +
			"follows the rollout of each thread it runs and relays it to the app, where it shows as a Codex session.\n\n" +
			"Every flag and argument ccrelay does not define (below) goes to Codex unchanged, in its order;\n" +
			"so does everything after --. Codex's own help: ccrelay codex -- --help.\n\n" +
			"The app follows a Codex session in the terminal; it cannot answer Codex's approvals there (Codex's\n" +
			"rollout does not hold them) nor take it over: see docs/compatibility.md.",
		Example: `  ccrelay codex                        # the Codex TUI here, relayed
  ccrelay codex resume <thread id>     # continue a thread
  ccrelay codex -m gpt-5.5 "fix the test"`,
		Args:               cobra.ArbitraryArgs,
		SilenceUsage:       true,
		SilenceErrors:      true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			own, codexArgs := splitArgs(cmd.Flags(), args)
			if err := cmd.Flags().Parse(own); err != nil {
				return err
			}
			if help, _ := cmd.Flags().GetBool("help"); help {
				return cmd.Help()
			}
			if f.remote {
				if runCodexRemote == nil {
					return errors.New("ccrelay codex --remote: remote mode for Codex is not in this build")
				}
				return runCodexRemote(cmd.Context(), &f, codexArgs)
			}
			if f.daemonPipe || f.session != "" || f.startedBy != "" || f.reportFD != 0 {
				return errors.New("--session, --daemon-pipe, --daemon-report-fd and --started-by need --remote")
			}
			return runCodexLocal(cmd.Context(), &f, codexArgs)
		},
	}
	cmd.Flags().StringVar(&f.codex, "codex", "codex", "the codex binary to run")
	cmd.Flags().StringVar(&f.state, "state", "", "state folder: cursors, outbox and log (default $XDG_STATE_HOME/ccrelay; %LocalAppData%\\ccrelay\\state on Windows)")
	cmd.Flags().StringVar(&f.out, "out", "", "with no relay, append the envelopes to this one JSONL file (default: one file per thread in <state>/codex/<folder>/sessions; ignored with --relay)")
	cmd.Flags().StringVar(&f.relay, "relay", "", "send the session to the relay at this URL (default $CCRELAY_RELAY, or the relay ccrelay pair or ccrelay login remembered)")
	cmd.Flags().StringVar(&f.relayToken, "relay-token", "", "the relay's token (visible in ps: prefer --relay-token-file; default $CCRELAY_TOKEN, or the token of a relay on this machine)")
	cmd.Flags().StringVar(&f.tokenFile, "relay-token-file", "", "read the relay's token from this file (mode 0600)")
	cmd.Flags().BoolVar(&f.plaintext, "plaintext", false, "send to a relay on another machine even when no device is paired with this machine (the relay can read the session)")
	cmd.Flags().BoolVar(&f.remote, "remote", false, "start headless, without a terminal: a session driven from the app (needs a relay)")
	cmd.Flags().StringVar(&f.session, "session", "", "with --remote: the session to create or continue (default: a new one)")
	cmd.Flags().BoolVar(&f.daemonPipe, "daemon-pipe", false, "started by ccrelay daemon: its messages come on stdin, and the session ends when stdin does")
	cmd.Flags().StringVar(&f.startedBy, "started-by", "", "the daemon session that started this one")
	cmd.Flags().IntVar(&f.reportFD, "daemon-report-fd", 0, "with --daemon-pipe: the descriptor on which to tell the daemon the thread's id")
	_ = cmd.Flags().MarkHidden("daemon-pipe")
	_ = cmd.Flags().MarkHidden("daemon-report-fd")
	_ = cmd.Flags().MarkHidden("started-by")
	cmd.Flags().BoolP("help", "h", false, "help for codex")
	return cmd
}

// runCodexLocal is local mode for Codex: the Codex CLI in this terminal,
// the rollouts of the threads it runs followed and mapped into the outbox.
func runCodexLocal(ctx context.Context, f *codexFlags, codexArgs []string) error {
	// No Codex: said before anything is set up or said.
	if _, err := exec.LookPath(f.codex); err != nil {
		return fmt.Errorf("%w (%v)", launcher.ErrCodexNotFound, err)
	}
	state, cwd, home, err := runPlace(f.state)
	if err != nil {
		return err
	}
	codexHome := codex.Home(os.Getenv, home)
	folderState := codexFolderState(state, cwd)
	// The terminal belongs to Codex: ccrelay logs to a file.
	slot, logFile, log, err := openCodexRun(state, cwd)
	if err != nil {
		return err
	}
	defer slot.Release()
	defer logFile.Close()
	runDir := slot.Path
	version, warning := checkCodexVersion(ctx, f.codex, log, os.Stderr)

	if f.out == "" || f.relay != "" {
		if f.relay, _, err = chooseRelay(f.relay, state); err != nil {
			return err
		}
	}
	link := &codexLink{cwd: cwd, version: version, warning: warning, log: log}
	gate := &noticeGate{out: os.Stderr, log: log}
	var out launcher.Outbox
	var startLine string
	var finishSend func()
	if f.relay != "" {
		rr, err := openRelayRun(f.relay, f.relayToken, f.tokenFile, f.plaintext, state, runDir, log)
		if err != nil {
			return err
		}
		token, kr, box := rr.token, rr.kr, rr.box
		defer box.Close()
		if _, err := slot.Leftovers(func(dir string) error {
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
		link.sender = sender
		sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
		sendDone, linkDone := make(chan error, 1), make(chan struct{})
		go func() { sendDone <- sender.Run(sendCtx) }()
		go func() { defer close(linkDone); link.refuseCommands(sendCtx) }()
		finishSend = func() {
			gate.release()
			ex := exitFlush{sender: sender, box: box, sendDone: sendDone, url: f.relay, gate: gate, out: os.Stderr,
				timeout: exitFlushTimeout, keptIn: runDir}
			ex.run()
			stopSend()
			<-linkDone
			if !ex.ended {
				<-sendDone
			}
		}
		out = box
		host, _ := os.Hostname()
		startLine = fmt.Sprintf("ccrelay: relaying Codex to %s as %s: each thread it runs here is a session in the app", f.relay, host)
		if why := launcher.CodexFirstThreadOnly(codexArgs); why != "" {
			startLine = fmt.Sprintf("ccrelay: relaying Codex to %s as %s: its first thread here is a session in the app, a thread started after it (/new) is not: %s", f.relay, host, why)
		}
	} else {
		recording := f.out
		var fo *launcher.FileOutbox
		if f.out != "" {
			fo, err = launcher.OpenFileOutbox(f.out)
		} else {
			recording = filepath.Join(folderState, "sessions")
			fo, err = launcher.OpenSessionOutbox(recording)
		}
		if err != nil {
			return err
		}
		defer fo.Close()
		if _, err := slot.Leftovers(func(string) error { return nil }); err != nil {
			log.Warn("could not remove what an earlier run left", "err", err)
		}
		out = fo
		startLine = fmt.Sprintf("ccrelay: no relay set up: recording Codex's threads to %s; run ccrelay setup (or ccrelay login) once to reach a phone", recording)
		if why := launcher.CodexFirstThreadOnly(codexArgs); why != "" {
			startLine = fmt.Sprintf("ccrelay: no relay set up: recording Codex's first thread to %s, not a thread started after it (/new): %s; run ccrelay setup (or ccrelay login) once to reach a phone", recording, why)
		}
	}

	pipe := launcher.NewCodexPipeline(out, func(thread string) launcher.CodexMapper { return mapper.NewCodex(thread) })
	pipe.OnModel(func(thread, model string) { link.announce(thread, model) })
	// The turn a killed run left open ends once its lines are read again.
	if err := pipe.KeepTurns(filepath.Join(runDir, launcher.CodexTurnsFile), log); err != nil {
		log.Warn("could not read the open Codex turns of an earlier run", "err", err)
	}
	follower := scanner.NewCodexFollower(scanner.CodexConfig{CursorFile: filepath.Join(runDir, "codex-cursor.json"), Logger: log}, pipe)
	followCtx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	followDone := make(chan error, 1)
	go func() { followDone <- follower.Run(followCtx) }()

	fmt.Fprintln(os.Stderr, startLine)
	gate.hold() // the terminal is Codex's until it exits
	// Ctrl-C belongs to Codex (RunCodexLocal hands it on); SIGTERM and
	// SIGHUP end the run, Codex getting the signal itself.
	runCtx, stopRun := signalContext(context.WithoutCancel(ctx), syscall.SIGTERM, syscall.SIGHUP)
	defer stopRun()
	code, runErr := launcher.RunCodexLocal(runCtx, launcher.CodexLocalOptions{Codex: f.codex, Args: codexArgs, CodexHome: codexHome,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Logger: log,
		OnThread: func(path string, meta *codex.SessionMeta) {
			id, _ := codex.ThreadID(path)
			link.announce(id, pipe.Model(id))
			follower.Follow(path)
		}})
	// Codex is gone: read what it wrote last, close the open turns, flush.
	stopFollow()
	followErr := <-followDone
	status := protocol.StatusCompleted
	if code != 0 {
		status = protocol.StatusFailed
	}
	closeErr := pipe.Close(context.WithoutCancel(ctx), status)
	if finishSend != nil {
		finishSend()
	} else {
		gate.release()
	}
	link.hint(os.Stderr)
	switch {
	case runErr != nil:
		return runErr
	case closeErr != nil:
		return closeErr
	case followErr != nil:
		return followErr
	case code != 0:
		return &exitError{code: code}
	}
	return nil
}

// checkCodexVersion reads the version of the Codex CLI at bin and, when it
// is not the one ccrelay was tested with, says so once: in the log and on
// notice. It returns the version ("" when it cannot be read) and the
// warning ("" for none).
func checkCodexVersion(ctx context.Context, bin string, log *slog.Logger, notice io.Writer) (version, warning string) {
	v, err := codex.InstalledVersion(ctx, bin)
	if err != nil {
		log.Info("could not read the Codex CLI's version", "err", err)
		return "", ""
	}
	warning = codex.VersionWarning(v)
	if warning != "" {
		log.Warn(warning, "codexVersion", v, "testedVersion", codex.TestedVersion)
		fmt.Fprintln(notice, "ccrelay: warning:", warning)
	}
	return v, warning
}

// codexLink is what local mode for Codex says to the relay: each thread's
// info (agent codex, its version and model), and a refusal of every
// command, since Codex in the terminal takes none from the app.
type codexLink struct {
	sender           *apiclient.Client // nil: no relay
	cwd              string
	version, warning string
	log              *slog.Logger

	mu   sync.Mutex
	last string // the thread announced last, for the resume hint
}

// errCodexLocal answers every command to a Codex session in the terminal.
var errCodexLocal = errors.New("this Codex session runs in its terminal (ccrelay codex), which takes nothing from the app: answer Codex there")

func (l *codexLink) announce(thread, model string) {
	l.mu.Lock()
	l.last = thread
	l.mu.Unlock()
	if l.sender == nil || thread == "" {
		return
	}
	l.sender.Announce(thread, agentSessionInfo(l.cwd, launcher.SessionState{Mode: "local", Status: launcher.StatusIdle, Model: model},
		protocol.AgentCodex, l.version, l.warning, ""))
}

// refuseCommands answers each command from the app with errCodexLocal
// until ctx ends.
func (l *codexLink) refuseCommands(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-l.sender.Commands():
			l.log.Info("command from the app refused: Codex runs in the terminal", "session", in.Session, "id", in.Command.ID, "kind", in.Command.Kind)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := l.sender.Reply(rctx, in.Session, in.Command.ID, false, errCodexLocal.Error()); err != nil {
				l.log.Warn("could not answer a command; the answer is sent again on the next connection", "id", in.Command.ID, "err", err)
			}
			cancel()
		}
	}
}

// hint tells how to go on with the thread relayed last.
func (l *codexLink) hint(w io.Writer) {
	l.mu.Lock()
	id := l.last
	l.mu.Unlock()
	if id != "" {
		fmt.Fprintf(w, "ccrelay: to go on with this thread: ccrelay codex resume %s\n", id)
	}
}
