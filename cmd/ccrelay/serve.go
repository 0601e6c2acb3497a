package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/internal/dirs"
	"github.com/ccrelay/ccrelay/relay"
)

// DefaultListen is where `ccrelay serve` listens unless told otherwise.
const DefaultListen = "127.0.0.1:8707"

func dataDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return platformDir(dirs.Data, "data")
}

func newServeCmd() *cobra.Command {
	var listen, data string
	var lim relay.Limits
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the relay server (embedded SQLite) that apps connect to",
		Long: `Serve runs the relay: CLIs send session envelopes to it, apps follow and steer
the sessions. It stores everything in SQLite under the data folder, where it
also keeps its secret token (created on first start). The folder is private
(0700, its files 0600): a folder that others can open is made private, with a
warning. It listens on 127.0.0.1 unless told otherwise; the app URL it prints
carries the token in its #fragment, which browsers never send to a server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := dataDir(data)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			rl, err := startRelayWith(listen, dir, log, lim)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ccrelay relay listening on %s\n  data:  %s\n  app:   %s\n", rl.listening, dir, rl.appURL())
			for _, u := range rl.networkURLs() {
				fmt.Fprintf(cmd.OutOrStdout(), "  phone: %s\n", u)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Open the app URL in a browser. Ctrl-C stops the relay.")
			return rl.wait(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultListen, "address to listen on")
	cmd.Flags().StringVar(&data, "data", "", "data folder (default $XDG_DATA_HOME/ccrelay; %LocalAppData%\\ccrelay\\data on Windows)")
	cmd.Flags().IntVar(&lim.MaxConns, "max-conns", relay.DefaultMaxConns, "open connections at most, in total")
	cmd.Flags().IntVar(&lim.MaxConnsPerAddr, "max-conns-per-addr", relay.DefaultMaxConnsPerAddr, "open connections at most from one address (behind a proxy, all come from the proxy's)")
	return cmd
}

// runningRelay is a relay served by this process.
type runningRelay struct {
	base, token string
	listening   string // the address listened on
	everywhere  bool   // listening on every address (0.0.0.0 or ::)
	srv         *http.Server
	rs          *relay.Server
	store       *relay.Store
	stopConns   context.CancelFunc
	errc        chan error
	log         *slog.Logger
}

func (r *runningRelay) appURL() string { return r.base + "/#token=" + r.token }

// networkURLs are the app's URLs on this machine's network addresses, when
// the relay listens on all of them (--listen 0.0.0.0:PORT): what a phone on
// the same network opens.
func (r *runningRelay) networkURLs() []string {
	if !r.everywhere {
		return nil
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(r.base, "http://"))
	if err != nil {
		return nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, "http://"+net.JoinHostPort(ipn.IP.String(), port)+"/#token="+r.token)
	}
	return out
}

// startRelay serves a relay with the default limits: see startRelayWith.
func startRelay(listen, dir string, log *slog.Logger) (*runningRelay, error) {
	return startRelayWith(listen, dir, log, relay.Limits{})
}

// portTaken says whether err (from startRelay) is a listen address
// already in use: another relay, or another program, has the port.
func portTaken(err error) bool { return addrInUse(err) }

// startRelayWith listens on listen, then (and only if it can) makes the
// data folder dir private, opens its token and store, and serves.
func startRelayWith(listen, dir string, log *slog.Logger, lim relay.Limits) (*runningRelay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		hint := "choose another address with --listen"
		if portTaken(err) {
			hint = "the port is taken (another relay running?): " + hint + ", e.g. --listen 127.0.0.1:0 for any free port"
		}
		return nil, fmt.Errorf("listen on %s: %w; %s", listen, err, hint)
	}
	r, err := openRelay(ln, dir, log, lim)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return r, nil
}

func openRelay(ln net.Listener, dir string, log *slog.Logger, lim relay.Limits) (*runningRelay, error) {
	notes, err := relay.SecureDataDir(dir)
	for _, n := range notes {
		log.Warn(n)
	}
	if err != nil {
		return nil, err
	}
	token, err := relay.LoadOrCreateToken(dir)
	if err != nil {
		return nil, err
	}
	tokens, err := relay.LoadTokens(dir)
	if err != nil {
		return nil, err
	}
	store, err := relay.OpenStore(filepath.Join(dir, relay.StoreFile))
	if err != nil {
		return nil, err
	}
	rs := relay.NewServer(store, log, tokens...)
	rs.Limits = lim
	base, stopConns := context.WithCancel(context.Background())
	addr := ln.Addr().(*net.TCPAddr)
	everywhere := addr.IP.IsUnspecified()
	if everywhere { // the app URL on this machine
		addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: addr.Port}
	}
	r := &runningRelay{base: "http://" + addr.String(), token: token, listening: ln.Addr().String(), everywhere: everywhere, rs: rs, store: store, stopConns: stopConns,
		errc: make(chan error, 1), log: log, srv: rs.HTTPServer(base)}
	capped := rs.Listener(ln)
	go func() { r.errc <- r.srv.Serve(capped) }()
	return r, nil
}

// wait serves until ctx is done, then drains: no new connections, the
// websocket connections ended (a batch being stored commits or rolls back;
// unacked ones are resent by their CLI), the store closed.
func (r *runningRelay) wait(ctx context.Context) error {
	var serveErr error
	select {
	case serveErr = <-r.errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.srv.Shutdown(sctx)
	r.stopConns()
	r.rs.Wait()
	r.store.Close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	r.log.Info("relay stopped")
	return nil
}
