package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

func init() { runCodexRemote = runCodexRemoteMode }

// runCodexRemoteMode is `ccrelay codex --remote`: Codex driven from the
// app through codex app-server, headless. The session is the thread's:
// --session names a thread of Codex's to continue (thread/resume); without
// it, or when Codex has no such thread, a new thread starts, whose id
// Codex chooses. Codex's own arguments are not used in remote mode.
func runCodexRemoteMode(ctx context.Context, f *codexFlags, codexArgs []string) error {
	model, err := codexRemoteModel(codexArgs)
	if err != nil {
		return err
	}
	// The daemon's report pipe is closed on exec before anything runs
	// (codex --version first): a program that held it could write a
	// thread of its choosing there, or keep the daemon's reader waiting.
	report, err := openDaemonReport(f)
	if err != nil {
		return err
	}
	if report != nil {
		defer report.Close()
	}
	state, cwd, home, err := runPlace(f.state)
	if err != nil {
		return err
	}
	codexHome := codex.Home(os.Getenv, home)
	if f.session != "" && !launcher.ValidSessionID(f.session) {
		return fmt.Errorf("--session %q is not a session id (a UUID)", f.session)
	}
	if f.startedBy != "" && !launcher.ValidSessionID(f.startedBy) {
		return fmt.Errorf("--started-by %q is not a session id", f.startedBy)
	}
	thread := ""
	// gone is a thread a ccrelay of this state ran (its lock file is
	// there) that Codex has no rollout of: killed before Codex wrote the
	// thread, it cannot be resumed. Its session is told so, and what the
	// app sent it is answered (CodexThreadGone).
	gone := ""
	if f.session != "" {
		if _, err := codex.FindRollout(codexHome, f.session); err == nil {
			thread = f.session // continued
		} else {
			if _, err := os.Stat(launcher.CodexThreadLockPath(state, f.session)); err == nil {
				gone = f.session
			}
			// Codex chooses a new thread's id: the session is the thread's.
			fmt.Fprintf(os.Stderr, "ccrelay: Codex has no thread %s in %s; a new thread starts, under the id Codex gives it\n", f.session, codexHome)
		}
	}
	// One ccrelay runs a thread at a time: a thread to continue is taken
	// before its app-server starts, a new one as soon as Codex named it.
	var threadLock *launcher.CodexThreadLock
	defer func() { threadLock.Release() }()
	if thread != "" {
		if threadLock, err = launcher.LockCodexThread(state, thread); err != nil {
			return err
		}
	}
	if gone != "" {
		// Its commands are answered by this ccrelay only.
		goneLock, err := launcher.LockCodexThread(state, gone)
		if err != nil {
			return err
		}
		defer goneLock.Release()
	}
	if f.relay, _, err = chooseRelay(f.relay, state); err != nil {
		return err
	}
	if f.relay == "" {
		return errors.New("--remote needs a relay, as the prompts come from the app: run ccrelay setup (or ccrelay login) once, or give --relay URL")
	}
	slot, logFile, log, err := openCodexRun(state, cwd)
	if err != nil {
		return err
	}
	defer slot.Release()
	defer logFile.Close()
	runDir := slot.Path
	version, warning := checkCodexVersion(ctx, f.codex, log, os.Stderr)

	var daemonIn *bufio.Reader
	var fromDaemon daemonStart
	if f.daemonPipe {
		daemonIn = bufio.NewReader(os.Stdin)
		if fromDaemon, err = readDaemonStart(daemonIn); err != nil {
			return err
		}
	}
	rr, err := openRelayRun(f.relay, f.relayToken, f.tokenFile, f.plaintext, state, runDir, log)
	if err != nil {
		return err
	}
	token, kr, box := rr.token, rr.kr, rr.box
	defer box.Close()
	if _, err := slot.Leftovers(func(dir string) error {
		_, err := box.Adopt(filepath.Join(dir, "outbox"))
		return err
	}); err != nil {
		log.Warn("could not take over what an earlier run left", "err", err)
	}
	gate := &noticeGate{out: os.Stderr, log: log}
	sender := apiclient.NewClient(apiclient.Config{URL: f.relay, Token: token, Logger: log, Notice: gate, Keyring: kr}, box)
	sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
	sendDone := make(chan error, 1)
	go func() { sendDone <- sender.Run(sendCtx) }()
	defer func() {
		ex := exitFlush{sender: sender, box: box, sendDone: sendDone, url: f.relay, gate: gate, out: os.Stderr,
			timeout: exitFlushTimeout, keptIn: runDir}
		ex.run()
		stopSend()
		if !ex.ended {
			<-sendDone
		}
	}()

	// Each command's outcome, kept in the run's slot: a command the relay
	// delivers again, even to a ccrelay started after this one, is
	// answered from it and never carried out twice.
	ledger, err := launcher.OpenLedger(filepath.Join(runDir, "commands.jsonl"))
	if err != nil {
		return err
	}
	defer ledger.Close()
	link := &codexRemoteLink{sender: sender, cwd: cwd, version: version, warning: warning, log: log,
		cmds: make(chan launcher.Command), machine: fromDaemon.Machine, startedBy: f.startedBy, startedAs: f.session,
		gone: gone, ledger: ledger}
	pipe := launcher.NewCodexPipeline(box, func(thread string) launcher.CodexMapper { return mapper.NewCodex(thread) })
	follower := scanner.NewCodexFollower(scanner.CodexConfig{CursorFile: filepath.Join(runDir, "codex-cursor.json"), Logger: log}, pipe)
	followCtx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	followDone := make(chan error, 1)
	go func() { followDone <- follower.Run(followCtx) }()

	loopCtx, stopLoop := signalContext(ctx, syscall.SIGTERM, syscall.SIGHUP)
	defer stopLoop()
	var daemonWhy func() error
	if daemonIn != nil {
		var stopWatch func()
		loopCtx, daemonWhy, stopWatch = watchDaemon(loopCtx, daemonIn, os.Stdin, nil)
		defer stopWatch()
	}
	linkCtx, stopLink := context.WithCancel(loopCtx)
	linkDone := make(chan struct{})
	threads := make(chan string, 1)
	go func() { defer close(linkDone); link.run(linkCtx, threads) }()
	firstDone := make(chan struct{})
	started := false
	runErr := launcher.RunCodexRemote(loopCtx, launcher.CodexLoopOptions{
		Remote:   launcher.CodexRemoteOptions{Codex: f.codex, Dir: cwd, Thread: thread, Model: model, StopTimeout: daemonStopTimeout, Logger: log},
		Pipeline: pipe, Follower: follower, Commands: link.cmds, Events: link, Logger: log, Ledger: ledger,
		OnThread: func(id string) {
			started = true
			if threadLock == nil {
				if l, err := launcher.LockCodexThread(state, id); err != nil {
					log.Warn("could not lock the new Codex thread", "thread", id, "err", err)
				} else {
					threadLock = l
				}
			}
			threads <- id
			if report != nil {
				// The daemon knows the session by the id its start named:
				// it learns the thread's, which Codex chose.
				if err := reportThread(report, id); err != nil {
					log.Warn("could not tell the daemon the thread's id", "thread", id, "err", err)
				}
			}
			fmt.Fprintf(os.Stderr, "ccrelay: Codex thread %s is a session in the app (%s); its prompts come from there\n", id, f.relay)
			if gone != "" {
				link.endGone(loopCtx, pipe, id)
			}
			if fromDaemon.Prompt != "" {
				go func() {
					defer close(firstDone)
					link.first(loopCtx, fromDaemon.Prompt)
				}()
			} else {
				close(firstDone)
			}
		}})
	stopLink()
	<-linkDone
	if started {
		<-firstDone
	}
	stopFollow()
	followErr := <-followDone
	status := protocol.StatusCancelled
	if daemonWhy != nil && errors.Is(daemonWhy(), errDaemonGone) {
		status = protocol.StatusFailed
	}
	closeErr := pipe.Close(context.WithoutCancel(ctx), status)
	switch {
	case runErr != nil:
		return runErr
	case closeErr != nil:
		return closeErr
	}
	return followErr
}

// codexRemoteModel reads the one Codex option remote mode takes, the
// model (--model M, --model=M, -m M), checked as the app's are; any other
// argument is refused: the thread runs with Codex's configuration.
func codexRemoteModel(args []string) (string, error) {
	model := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "--model" || a == "-m") && i+1 < len(args):
			model = args[i+1]
			i++
		case strings.HasPrefix(a, "--model="):
			model = strings.TrimPrefix(a, "--model=")
		default:
			return "", fmt.Errorf("ccrelay codex --remote takes only --model of Codex's options (got %q): the thread runs in this folder with Codex's configuration", clipArg(a))
		}
	}
	if model != "" {
		if err := launcher.CheckModel(model); err != nil {
			return "", err
		}
	}
	return model, nil
}

func clipArg(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// codexRemoteLink connects a Codex remote session with the relay: its
// state and live deltas out, the app's commands in, each answered.
type codexRemoteLink struct {
	sender                *apiclient.Client
	cwd, version, warning string
	machine, startedBy    string
	// startedAs is the id --session named: announced as startedAs when
	// the thread's id is another (a new thread, whose id Codex chose), so
	// that the app that asked the daemon for it finds it.
	startedAs string
	log       *slog.Logger
	cmds      chan launcher.Command
	// gone is a thread of this state's that Codex has no rollout of
	// (see runCodexRemoteMode): its session is told it ended, and its
	// commands are answered launcher.CodexThreadGone, recorded in ledger.
	gone   string
	ledger *launcher.Ledger
}

// endGone tells the app that the session of l.gone cannot go on, and why,
// now that next, a new thread, takes its place: its info says so (ended,
// continuedAs, error), and a note in it.
func (l *codexRemoteLink) endGone(ctx context.Context, pipe *launcher.CodexPipeline, next string) {
	l.State(l.gone, goneThreadState(l.gone, next))
	text := "ccrelay stopped, and Codex with it, before Codex wrote this thread's first prompt: Codex has no thread " + l.gone +
		", so this session cannot go on, and nothing sent to it was run. It goes on as a new Codex session, " + next + "."
	if err := pipe.Note(ctx, l.gone, "codex-gone:"+l.gone+":"+next, text, time.Now().UnixMilli()); err != nil {
		l.log.Warn("could not note that a Codex thread is gone", "thread", l.gone, "err", err)
	}
	fmt.Fprintf(os.Stderr, "ccrelay: Codex thread %s was never written (ccrelay was stopped before Codex wrote it): its session in the app says so, and what the app sent it is refused\n", l.gone)
}

// goneThreadState is what the session of gone, a thread Codex never
// wrote, says of itself once next took its place: it ended (nothing can
// run it again), why (error), and the session it goes on in.
func goneThreadState(gone, next string) launcher.SessionState {
	return launcher.SessionState{Mode: "remote", Status: launcher.StatusIdle, Error: launcher.CodexThreadGone(gone, next).Error(),
		Ended: true, ContinuedAs: next}
}

// State implements launcher.RemoteEvents.
func (l *codexRemoteLink) State(session string, st launcher.SessionState) {
	info := agentSessionInfo(l.cwd, st, protocol.AgentCodex, l.version, l.warning, "")
	startedAs := ""
	if l.startedAs != "" && l.startedAs != session {
		startedAs = l.startedAs
	}
	if l.machine != "" || l.startedBy != "" || startedAs != "" {
		var m map[string]json.RawMessage
		if json.Unmarshal(info, &m) == nil {
			if startedAs != "" {
				m["startedAs"], _ = json.Marshal(startedAs)
			}
			if l.machine != "" {
				m["machine"], _ = json.Marshal(l.machine)
			}
			if l.startedBy != "" {
				m["startedBy"], _ = json.Marshal(l.startedBy)
			}
			info, _ = json.Marshal(m)
		}
	}
	l.sender.Announce(session, info)
}

// Live implements launcher.RemoteEvents.
func (l *codexRemoteLink) Live(session string, payload json.RawMessage) {
	l.sender.Live(session, payload)
}

// run hands the app's commands for the thread to the session, until ctx
// ends; commands for another session are rejected.
func (l *codexRemoteLink) run(ctx context.Context, threads <-chan string) {
	var thread string
	select {
	case thread = <-threads:
	case <-ctx.Done():
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-l.sender.Commands():
			reply := func(err error) {
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				if rerr := l.sender.Reply(rctx, in.Session, in.Command.ID, err == nil, msg); rerr != nil {
					l.log.Warn("could not answer a command", "id", in.Command.ID, "err", rerr)
				}
			}
			if l.gone != "" && in.Session == l.gone {
				launcher.AnswerGoneThread(l.ledger, launcher.Command{Command: in.Command, Reply: reply}, launcher.CodexThreadGone(l.gone, thread))
				continue
			}
			if in.Session != thread {
				reply(fmt.Errorf("this ccrelay runs the Codex session %s, not %s", thread, in.Session))
				continue
			}
			select {
			case l.cmds <- launcher.Command{Command: in.Command, Reply: reply}:
			case <-ctx.Done():
				reply(launcher.ErrCodexStopped)
				return
			}
		}
	}
}

// first sends the daemon's first prompt as a prompt from the app.
func (l *codexRemoteLink) first(ctx context.Context, text string) {
	done := make(chan error, 1)
	select {
	case l.cmds <- launcher.Command{Command: protocol.Command{Kind: protocol.CommandPrompt, Text: text}, Reply: func(err error) { done <- err }}:
	case <-ctx.Done():
		return
	}
	select {
	case err := <-done:
		if err != nil {
			l.log.Warn("the first prompt did not reach Codex", "err", err)
		}
	case <-ctx.Done():
	}
}
