package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/internal/demo"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/replay"
)

func newDemoCmd() *cobra.Command {
	var listen string
	var exit bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a relay, replay a bundled Claude Code session into it, and say where an app connects",
		Long: `Demo shows ccrelay's main job on one machine, with no account and no network:
it starts a relay on embedded SQLite (in a temporary folder), replays a bundled
session recorded from the real Claude Code into it through the CLI's durable
outbox, and prints the app URL. It keeps serving until Ctrl-C (--exit: stop
after the replay).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			tmp, err := os.MkdirTemp("", "ccrelay-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			rl, err := startRelay(listen, filepath.Join(tmp, "relay"), log)
			if err != nil {
				return err
			}
			stopped := false
			defer func() {
				if !stopped {
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					rl.wait(ctx)
				}
			}()
			main, err := demo.Write(filepath.Join(tmp, "transcripts"))
			if err != nil {
				return err
			}
			s, err := replay.FindSession([]string{main})
			if err != nil {
				return err
			}
			sender, err := startRelaySender(rl.base, rl.token, filepath.Join(tmp, "outbox"), s.ID, log)
			if err != nil {
				return err
			}
			st, err := replay.Run(cmd.Context(), s, replay.Options{}, func(e *protocol.Envelope) error { return sender.emit(e) })
			if err != nil {
				return err
			}
			if err := sender.finish(cmd.Context(), time.Minute); err != nil {
				return err
			}
			fmt.Fprintf(out, "ccrelay demo: relay on %s (data in %s, removed on exit)\n", rl.base, tmp)
			fmt.Fprintf(out, "replayed session %s: %d records from %d files, %d envelopes stored in the relay\n",
				s.ID, st.Lines, st.Files, st.EnvelopeCount())
			fmt.Fprintf(out, "an app connects at %s\n", rl.appURL())
			fmt.Fprintf(out, "(the token is in the #fragment, which the browser never sends; the web app plugs in at /)\n")
			if exit {
				return nil
			}
			fmt.Fprintln(out, "serving; press Ctrl-C to stop")
			stopped = true
			return rl.wait(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultListen, "address to listen on")
	cmd.Flags().BoolVar(&exit, "exit", false, "stop after the replay instead of serving")
	return cmd
}
