package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/replay"
)

// replayStall is how long replay --to waits at the end for a relay that
// confirms nothing: a relay that confirms something is waited for, however
// long a large session takes in all.
const replayStall = 30 * time.Second

func newReplayCmd() *cobra.Command {
	var (
		format    string
		color     string
		verbose   bool
		quiet     bool
		maxLine   int
		to        string
		token     string
		tokFile   string
		state     string
		speed     float64
		plaintext bool
	)
	cmd := &cobra.Command{
		Use:   "replay FILE [SUBAGENT_FILE...]",
		Short: "Replay a Claude Code transcript or a Codex rollout through the mapper",
		Long: `Replay reads one recorded session and writes the session-protocol envelopes it maps to.

FILE is the main transcript (~/.claude/projects/<project>/<session>.jsonl). Given
alone, the subagent transcripts beside it (<session>/subagents/agent-*.jsonl) are
read too; records of all files are merged in timestamp order.

FILE may also be a Codex rollout (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl,
whose first line is a session_meta): its session is the thread, and the
rollouts of its subagents' threads beside it are read with it.

Formats: jsonl (one envelope per line; default when stdout is not a terminal)
and chat (a readable transcript; default on a terminal).

With --to, the envelopes also go to a relay, through the durable outbox in
the state folder. Once the session is read, replay waits for the relay to
confirm them all, for as long as it confirms some: it gives up when the relay
has confirmed nothing for 30 s, and what is not sent stays on disk for the
next run to that relay.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer replay.LimitMemory()()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if format == "" {
				format = "jsonl"
				if f, ok := stdout.(*os.File); ok && replay.IsTerminal(f) {
					format = "chat"
				}
			}
			s, err := replay.FindSession(args)
			if err != nil {
				return err
			}
			bw := bufio.NewWriterSize(stdout, 64<<10)
			var emit func(*protocol.Envelope) error
			var chat *replay.Chat
			switch format {
			case "jsonl":
				var line []byte
				emit = func(e *protocol.Envelope) error {
					var err error
					line, err = e.AppendJSON(line[:0])
					if err != nil {
						return err
					}
					line = append(line, '\n')
					_, err = bw.Write(line)
					return err
				}
			case "chat":
				useColor := color == "always"
				if color == "auto" {
					if f, ok := stdout.(*os.File); ok {
						useColor = replay.ColorSupported(f)
					}
				}
				chat = replay.NewChat(bw, useColor)
				emit = chat.Write
			default:
				return fmt.Errorf("unknown --format %q (use jsonl or chat)", format)
			}

			var sender *relaySender
			if to != "" {
				st, err := stateDir(state)
				if err != nil {
					return err
				}
				// Checked as every relay URL is, and the relay remembered
				// with its authority (pair or login --ca) is trusted as
				// the other commands trust it.
				if _, err := apiclient.CheckURL(to); err != nil {
					return fmt.Errorf("--to: %w", err)
				}
				if to, _, err = chooseRelay(to, st); err != nil {
					return err
				}
				tok, err := relayToken(token, tokFile, "", state, to, stderr)
				if err != nil {
					return err
				}
				log := slog.New(slog.NewTextHandler(io.Discard, nil))
				if verbose {
					log = slog.New(slog.NewTextHandler(stderr, nil))
				}
				kr, err := openKeyring(st)
				if err != nil {
					return err
				}
				if err := checkPlaintext(to, kr, plaintext); err != nil {
					return err
				}
				sender, err = startRelaySenderNotice(to, tok, filepath.Join(st, "replay", s.ID), s.ID, log, stderr, kr)
				if err != nil {
					return err
				}
				inner := emit
				emit = func(e *protocol.Envelope) error {
					if err := inner(e); err != nil {
						return err
					}
					return sender.emit(e)
				}
			}
			if speed > 0 {
				emit = paced(cmd.Context(), speed, emit, func() { sender.syncIfAny() })
			}
			opts := replay.Options{MaxLine: maxLine}
			var bar *replay.ProgressBar
			if f, ok := stderr.(*os.File); ok && replay.IsTerminal(f) && !quiet {
				bar = replay.NewProgressBar(stderr, time.Now)
				opts.Progress = bar.Update
			}
			st, runErr := replay.Run(cmd.Context(), s, opts, emit)
			if bar != nil {
				bar.Clear()
			}
			if chat != nil && runErr == nil {
				runErr = chat.Finish()
			}
			if err := bw.Flush(); err != nil && runErr == nil {
				runErr = fmt.Errorf("write output: %w", err)
			}
			// Nothing read, nothing to sum up: the error says why.
			if !quiet && st != nil && st.Lines > 0 {
				max := 20
				if verbose {
					max = 0
				}
				replay.WriteSummary(stderr, st, max)
			}
			if sender != nil && runErr == nil {
				if err := sender.finish(cmd.Context(), replayStall); err != nil {
					return fmt.Errorf("send to %s: %w", to, err)
				}
				if !quiet {
					fmt.Fprintf(stderr, "sent %d envelopes of session %s to %s\n", st.EnvelopeCount(), s.ID, to)
				}
			}
			if errors.Is(runErr, replay.ErrNothingRead) {
				return &exitError{code: 1, err: runErr}
			}
			return runErr
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "output format: jsonl or chat (default: chat on a terminal, else jsonl)")
	cmd.Flags().StringVar(&color, "color", "auto", "color in chat format: auto, always or never")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every skipped line")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no summary or progress on stderr")
	cmd.Flags().IntVar(&maxLine, "max-line", replay.DefaultMaxLine, "longest line to read, in bytes; longer lines are skipped")
	cmd.Flags().StringVar(&to, "to", "", "also send the envelopes to the relay at this URL (e.g. http://127.0.0.1:8707); waits until it confirms them, giving up after 30 s without a confirmation")
	cmd.Flags().BoolVar(&plaintext, "plaintext", false, "send to a relay on another machine even when no device is paired with this machine (the relay can read the session)")
	cmd.Flags().StringVar(&token, "relay-token", "", "the relay's token (visible in ps: prefer --relay-token-file; default $CCRELAY_TOKEN, or the token of a relay on this machine)")
	cmd.Flags().StringVar(&tokFile, "relay-token-file", "", "read the relay's token from this file (mode 0600)")
	cmd.Flags().StringVar(&state, "state", "", "state folder for the durable outbox (default $XDG_STATE_HOME/ccrelay; %LocalAppData%\\ccrelay\\state on Windows)")
	cmd.Flags().Float64Var(&speed, "speed", 0, "pace the replay by the records' timestamps: 1 = real time, 10 = ten times faster, 0 = as fast as possible")
	return cmd
}

// paced delays each envelope so that envelopes leave at speed times the pace
// of their timestamps. before is called before a wait (to push out what is
// batched, so the relay sees it on time).
func paced(ctx context.Context, speed float64, emit func(*protocol.Envelope) error, before func()) func(*protocol.Envelope) error {
	var first int64
	var start time.Time
	return func(e *protocol.Envelope) error {
		if first == 0 {
			first, start = e.Time, time.Now()
		}
		due := start.Add(time.Duration(float64(time.Duration(e.Time-first)*time.Millisecond) / speed))
		if d := time.Until(due); d > 0 {
			before()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		return emit(e)
	}
}
