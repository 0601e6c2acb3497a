package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/demo"
	"github.com/ccrelay/ccrelay/launcher"
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
outbox, announces it as the CLI does (folder, machine, model), and prints the
app URL. It keeps serving until Ctrl-C (--exit: stop after the replay).

The demo is not a service: when the port of --listen is taken, it listens on
a free port instead and says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			addr, taken, err := demoAddr(listen)
			if err != nil {
				return err
			}
			tmp, err := os.MkdirTemp("", "ccrelay-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			rl, err := startRelay(addr, filepath.Join(tmp, "relay"), log)
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
			if taken != "" {
				fmt.Fprintf(out, "ccrelay demo: port %s is in use, so the demo listens on a free port instead: %s\n", taken, rl.listening)
			}
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
			// Announced as the CLI announces a session it runs (sent before
			// the envelopes); the recording is over, so it is idle.
			cwd, model := transcriptInfo(main)
			sender.client.Announce(s.ID, recordingInfo(sessionInfo(cwd, launcher.SessionState{Status: "idle", Model: model})))
			// Its last turn is closed as local mode closes it when Claude
			// exits.
			st, err := replay.Run(cmd.Context(), s, replay.Options{End: protocol.StatusCompleted},
				func(e *protocol.Envelope) error { return sender.emit(e) })
			if err != nil {
				return err
			}
			if err := sender.finish(cmd.Context(), time.Minute); err != nil {
				return err
			}
			fmt.Fprintf(out, "ccrelay demo: relay on %s (data in %s, removed on exit)\n", rl.listening, tmp)
			fmt.Fprintf(out, "replayed session %s (%s): %d records from %d files, %d envelopes stored in the relay\n",
				s.ID, cwd, st.Lines, st.Files, st.EnvelopeCount())
			fmt.Fprintf(out, "an app connects at\n  app:   %s\n", rl.appURL())
			for _, u := range rl.networkURLs() {
				fmt.Fprintf(out, "  phone: %s\n", u)
			}
			fmt.Fprintf(out, "(the token is in the #fragment, which the browser never sends; the web app plugs in at /)\n")
			if exit {
				return nil
			}
			fmt.Fprintln(out, "serving; press Ctrl-C to stop")
			stopped = true
			return rl.wait(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultListen, "address to listen on (a taken port falls back to a free one)")
	cmd.Flags().BoolVar(&exit, "exit", false, "stop after the replay instead of serving")
	return cmd
}

// demoAddr returns the address the demo listens on: listen if its port is
// free, else port 0 on the same host (a free port) and the taken port.
func demoAddr(listen string) (addr, taken string, err error) {
	ln, err := net.Listen("tcp", listen)
	if err == nil {
		ln.Close()
		return listen, "", nil
	}
	host, port, serr := net.SplitHostPort(listen)
	if serr != nil || !addrInUse(err) {
		return "", "", fmt.Errorf("listen on %s: %w", listen, err)
	}
	return net.JoinHostPort(host, "0"), port, nil
}

// transcriptInfo reads the folder a session ran in and the model that
// answered last from its transcript; "" for what it does not say.
func transcriptInfo(path string) (cwd, model string) {
	f, err := os.Open(path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r struct {
			Type    string `json:"type"`
			Cwd     string `json:"cwd"`
			Message struct {
				Model string `json:"model"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if cwd == "" {
			cwd = r.Cwd
		}
		if r.Type == claude.TypeAssistant && r.Message.Model != "" {
			model = r.Message.Model
		}
	}
	return cwd, model
}

// recordingInfo marks a session's announced info as a recording's
// ("recording": true, docs/protocol.md): apps say that nothing runs it.
func recordingInfo(info json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(info, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	m["recording"] = json.RawMessage("true")
	b, err := json.Marshal(m)
	if err != nil {
		return info
	}
	return b
}
