package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

type localFlags struct {
	claude     string
	state      string
	out        string
	relay      string
	relayToken string
}

func addLocalFlags(cmd *cobra.Command, f *localFlags) {
	cmd.Flags().StringVar(&f.claude, "claude", "claude", "the claude binary to run")
	cmd.Flags().StringVar(&f.state, "state", "", "state folder: cursors, outbox and log (default $XDG_STATE_HOME/ccrelay)")
	cmd.Flags().StringVar(&f.out, "out", "", "append the session's envelopes to this JSONL file (default <state>/outbox.jsonl; not with --relay)")
	cmd.Flags().StringVar(&f.relay, "relay", "", "send the session to the relay at this URL (e.g. http://127.0.0.1:8707)")
	cmd.Flags().StringVar(&f.relayToken, "relay-token", "", "the relay's token (default $CCRELAY_TOKEN, or the token of a relay on this machine)")
}

func stateDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "ccrelay"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the state folder: %w", err)
	}
	return filepath.Join(home, ".local", "state", "ccrelay"), nil
}

// runLocal is local mode: interactive Claude in this terminal, its
// transcripts followed by the scanner and mapped into the outbox.
func runLocal(cmd *cobra.Command, f *localFlags, claudeArgs []string) error {
	ctx := cmd.Context()
	state, err := stateDir(f.state)
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	projectDir, err := claude.ProjectDir(claude.ConfigDir(os.Getenv, home), cwd)
	if err != nil {
		return err
	}
	runDir := filepath.Join(state, "projects", claude.EscapeProjectPath(cwd))
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("create state folder: %w", err)
	}
	// The terminal belongs to Claude: ccrelay logs to a file.
	logFile, err := os.OpenFile(filepath.Join(state, "ccrelay.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, nil))

	var out launcher.Outbox
	var sender *apiclient.Client
	if f.relay != "" {
		token, err := relayToken(f.relayToken, "")
		if err != nil {
			return err
		}
		box, err := apiclient.OpenOutbox(filepath.Join(runDir, "outbox"))
		if err != nil {
			return err
		}
		defer box.Close()
		sender = apiclient.NewClient(apiclient.Config{URL: f.relay, Token: token, Logger: log}, box)
		sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
		sendDone := make(chan error, 1)
		go func() { sendDone <- sender.Run(sendCtx) }()
		// Steering from the app needs remote mode, which this build does not
		// have yet: say so rather than leave commands unanswered.
		go func() {
			for {
				select {
				case <-sendCtx.Done():
					return
				case in := <-sender.Commands():
					_ = sender.Reply(sendCtx, in.Session, in.Command.ID, false,
						"this session runs in local mode in the terminal; steering it from the app is not available yet")
				}
			}
		}()
		defer func() {
			// Give the relay a moment to take what is left; the outbox
			// keeps the rest for the next run.
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := sender.Flush(fctx); err != nil {
				fmt.Fprintln(os.Stderr, "ccrelay: not everything reached the relay; it is kept and sent next time:", err)
			}
			cancel()
			stopSend()
			if err := <-sendDone; err != nil {
				fmt.Fprintln(os.Stderr, "ccrelay:", err)
			}
		}()
		out = box
	} else {
		outPath := f.out
		if outPath == "" {
			outPath = filepath.Join(state, "outbox.jsonl")
		}
		fo, err := launcher.OpenFileOutbox(outPath)
		if err != nil {
			return err
		}
		defer fo.Close()
		out = fo
	}
	pipe := launcher.NewPipeline("", out)
	sc, err := scanner.New(scanner.Config{ProjectDir: projectDir, CursorFile: filepath.Join(runDir, "cursor.json"), Logger: log}, pipe)
	if err != nil {
		return err
	}
	scanCtx, stopScan := context.WithCancel(context.WithoutCancel(ctx))
	scanDone := make(chan error, 1)
	go func() { scanDone <- sc.Run(scanCtx) }()

	self, err := os.Executable()
	if err != nil {
		stopScan()
		<-scanDone
		return fmt.Errorf("find ccrelay's own path for the hook: %w", err)
	}
	code, runErr := launcher.RunLocal(ctx, launcher.LocalOptions{
		Claude: f.claude, Args: claudeArgs, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		HookCommand: []string{self, "hook"},
		OnSession: func(s launcher.SessionStart) {
			log.Info("session", "id", s.SessionID, "source", s.Source, "transcript", s.TranscriptPath)
			sc.AddSession(s.SessionID)
			if sender != nil {
				sender.Announce(s.SessionID, sessionInfo(cwd, "local", "idle"))
			}
		},
		Logger: log,
	})
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
		Use:    "hook",
		Short:  "Forward Claude's SessionStart hook to the ccrelay that started it (used internally)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := launcher.ForwardHook(cmd.Context(), os.Stdin, os.Getenv); err != nil {
				// Never break Claude: report and succeed.
				fmt.Fprintln(os.Stderr, "ccrelay hook:", err)
			}
			return nil
		},
	}
}

// sessionInfo is the description of a session announced to the relay.
func sessionInfo(cwd, mode, status string) json.RawMessage {
	host, _ := os.Hostname()
	b, _ := json.Marshal(map[string]string{"cwd": cwd, "title": filepath.Base(cwd), "machine": host, "mode": mode, "status": status})
	return b
}
