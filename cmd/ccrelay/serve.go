package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/relay"
)

// DefaultListen is where `ccrelay serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:8707"

func dataDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "ccrelay"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the data folder: %w", err)
	}
	return filepath.Join(home, ".local", "share", "ccrelay"), nil
}

func newServeCmd() *cobra.Command {
	var listen, data string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the relay server (embedded SQLite) that apps connect to",
		Long: `Serve runs the relay: CLIs send session envelopes to it, apps follow and steer
the sessions. It stores everything in SQLite under the data folder, where it
also keeps its secret token (created on first start, mode 0600). It listens on
127.0.0.1 unless told otherwise; the app URL it prints carries the token in
its #fragment, which browsers never send to a server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := dataDir(data)
			if err != nil {
				return err
			}
			token, err := relay.LoadOrCreateToken(dir)
			if err != nil {
				return err
			}
			store, err := relay.OpenStore(filepath.Join(dir, "relay.db"))
			if err != nil {
				return err
			}
			defer store.Close()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			rs := relay.NewServer(store, token, log)
			base, stopConns := context.WithCancel(context.Background())
			defer stopConns()
			srv := &http.Server{Handler: rs.Handler(), ReadHeaderTimeout: 10 * time.Second,
				BaseContext: func(net.Listener) context.Context { return base }}
			fmt.Fprintf(cmd.OutOrStdout(), "ccrelay relay listening on http://%s\n  data:  %s\n  app:   http://%s/#token=%s\n",
				ln.Addr(), dir, ln.Addr(), token)
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
			}
			// Drain: stop accepting, end the websocket connections (a batch
			// being stored commits or rolls back; unacked ones are resent by
			// their CLI), then close the store.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = srv.Shutdown(ctx)
			stopConns()
			rs.Wait()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			log.Info("relay stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultListen, "address to listen on")
	cmd.Flags().StringVar(&data, "data", "", "data folder (default $XDG_DATA_HOME/ccrelay)")
	return cmd
}
