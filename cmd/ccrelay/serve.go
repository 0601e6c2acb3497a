package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/internal/dirs"
	"github.com/ccrelay/ccrelay/internal/logfile"
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
	var notify notifyFlags
	var opts serveOptions
	var keep retainFlag
	var metricsListen string
	var logFormat string
	var logPath string
	logMax := logSize(DefaultRelayLogBytes)
	var storeURL string
	var migrateOnly bool
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
			var logTo io.Writer = cmd.ErrOrStderr()
			if logPath != "" {
				lf, err := logfile.Open(logPath, int64(logMax))
				if err != nil {
					return fmt.Errorf("--log-file: %w", err)
				}
				defer lf.Close()
				logTo = lf
			}
			log, err := newLogger(logFormat, logTo)
			if err != nil {
				return err
			}
			if migrateOnly {
				if _, err := relay.SecureDataDir(dir); err != nil && storeURL == "" {
					return err
				}
				store, err := openStore(dir, storeURL)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "ccrelay: the store is at schema version %d\n", relay.SchemaVersion())
				return store.Close()
			}
			// Everything given is checked before anything is created.
			tr, err := opts.prepare(cmd.Context(), dir)
			if err != nil {
				return err
			}
			tr.store = storeURL
			rl, err := startRelayTransport(listen, dir, log, lim, tr)
			if err != nil {
				return err
			}
			stopNotify, err := rl.startNotify(dir, notify)
			if err != nil {
				ended, end := context.WithCancel(context.Background())
				end()
				rl.wait(ended) // stop serving
				return err
			}
			defer stopNotify()
			// The metrics listen before the banner: it says the relay is up.
			if metricsListen != "" {
				stopMetrics, err := serveMetrics(metricsListen, rl)
				if err != nil {
					ended, end := context.WithCancel(context.Background())
					end()
					rl.wait(ended)
					return err
				}
				defer stopMetrics()
			}
			rl.banner(cmd.OutOrStdout(), logFormat, dir, metricsListen, rl.everywhere && !tr.tls() && tr.transport.Proxies == nil)
			if keep > 0 {
				rctx, stopRetention := context.WithCancel(cmd.Context()) // ends with the relay
				var wg sync.WaitGroup
				wg.Go(func() { rl.rs.RunRetention(rctx, relay.Retention{Keep: time.Duration(keep)}) })
				defer wg.Wait()
				defer stopRetention()
			}
			return rl.wait(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultListen, "address to listen on")
	cmd.Flags().StringVar(&storeURL, "store", os.Getenv("CCRELAY_STORE"), "keep everything in this PostgreSQL database (postgres://user@host/db; a password from $PGPASSWORD or ~/.pgpass, not the URL: ps shows it) instead of SQLite in the data folder; several relays may share it (default $CCRELAY_STORE)")
	cmd.Flags().BoolVar(&migrateOnly, "migrate-only", false, "bring the store's schema to this version, then exit (for deploys)")
	cmd.Flags().StringVar(&data, "data", "", "data folder (default $XDG_DATA_HOME/ccrelay; %LocalAppData%\\ccrelay\\data on Windows)")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9707; off by default; never the public listener)")
	cmd.Flags().StringVar(&logPath, "log-file", "", "write the log to this file instead of stderr; past --log-file-max it becomes FILE.1 (replacing the one before) and a new FILE starts")
	cmd.Flags().Var(&logMax, "log-file-max", "the size at which --log-file turns over (e.g. 8MB, 512KB): the log takes at most twice this on disk")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log lines as text or json (one JSON object a line; json prints no link with the token: a log line says how to get it)")
	cmd.Flags().Var(&keep, "retain", "delete sessions inactive for longer than this (e.g. 30d, 12h; default: keep everything)")
	cmd.Flags().IntVar(&lim.MaxConns, "max-conns", relay.DefaultMaxConns, "open connections at most, in total")
	cmd.Flags().StringVar(&opts.certFile, "tls-cert", "", "serve HTTPS with this certificate file (PEM; read again on SIGHUP)")
	cmd.Flags().StringVar(&opts.keyFile, "tls-key", "", "the private key of --tls-cert (PEM)")
	cmd.Flags().StringVar(&opts.acme, "acme", "", "serve HTTPS with a certificate from Let's Encrypt for this domain (the relay must be reachable on port 443 under it; cached in the data folder)")
	cmd.Flags().StringVar(&opts.acmeDirectory, "acme-directory", "", "the ACME server's directory URL (default: Let's Encrypt)")
	cmd.Flags().StringVar(&opts.behindProxy, "behind-proxy", "", "a TLS proxy in front of the relay (its address, e.g. 127.0.0.1): trust its X-Forwarded-Proto/-For/-Host, from that address only")
	cmd.Flags().StringVar(&opts.publicURL, "public-url", "", "the address phones open (https://relay.example.com): the one name the relay answers to besides 127.0.0.1, and the base of printed links")
	cmd.Flags().IntVar(&lim.MaxConnsPerAddr, "max-conns-per-addr", relay.DefaultMaxConnsPerAddr, "open connections at most from one address (behind a proxy, all come from the proxy's)")
	cmd.Flags().DurationVar(&lim.CLIGoneAfter, "cli-gone-after", relay.DefaultCLIGoneAfter, "a session whose ccrelay disconnected and did not come back within this time is listed as no longer working (with the reason), a machine as its daemon gone")
	cmd.Flags().StringVar(&notify.ntfy, "notify-ntfy", "", "also post notifications to this ntfy topic URL (a generic text and a link, never content)")
	cmd.Flags().StringVar(&notify.contact, "push-contact", DefaultPushContact, "contact (mailto: or https:) given to browsers' push services")
	return cmd
}

// runningRelay is a relay served by this process.
type runningRelay struct {
	base, token string
	listening   string // the address listened on
	everywhere  bool   // listening on every address (0.0.0.0 or ::)
	public      string // the public URL, when given
	scheme      string // http or https
	srv         *http.Server
	rs          *relay.Server
	store       *relay.Store
	stopConns   context.CancelFunc
	errc        chan error
	log         *slog.Logger
	stopReload  func()
	stopFan     func() // ends the link to the other relays (RunFanout)
}

func (r *runningRelay) appURL() string { return r.base + "/#token=" + r.token }

// plainNote is the banner's note for a relay on every address over plain
// http.
const plainNote = "plain http answers only this machine; a phone gets a page that says to use HTTPS (see docs/deploy.md)"

// banner says the relay is up. As text (a terminal) it prints the app's
// link with the relay's token on out. Under --log-format json the output
// goes to a log (a journal, a collector) kept and read by others: it is one
// log line without the token, which says how to get the link instead.
func (r *runningRelay) banner(out io.Writer, format, dir, metrics string, plain bool) {
	if format == "json" {
		args := []any{"listen", r.listening, "data", dir, "app", r.base + "/",
			"link", "the app's link holds the relay's token, which no log holds: pair a phone or a browser with: ccrelay pair; on this machine open " + r.base + "/#token= followed by the first line of " + filepath.Join(dir, relay.TokenFile)}
		if r.public != "" {
			args = append(args, "public", r.public)
		}
		if us := r.networkURLs(); len(us) > 0 {
			args = append(args, "phone", us)
		}
		if metrics != "" {
			args = append(args, "metrics", "http://"+metrics+"/metrics")
		}
		if plain {
			args = append(args, "note", plainNote)
		}
		r.log.Info("relay listening", args...)
		return
	}
	fmt.Fprintf(out, "ccrelay relay listening on %s\n  data:  %s\n  app:   %s\n", r.listening, dir, r.appURL())
	if r.public != "" {
		fmt.Fprintf(out, "  public: %s\n", r.public)
	}
	for _, u := range r.networkURLs() {
		fmt.Fprintf(out, "  phone: %s\n", u)
	}
	if metrics != "" {
		fmt.Fprintf(out, "  metrics: http://%s/metrics\n", metrics)
	}
	if plain {
		fmt.Fprintln(out, "  note:  "+plainNote)
	}
	fmt.Fprintln(out, "Open the app URL in a browser on this machine; pair a phone with: ccrelay pair. Ctrl-C stops the relay.")
}

// networkURLs are the app's URLs on this machine's network addresses, when
// the relay listens on all of them (--listen 0.0.0.0:PORT): what a phone on
// the same network opens.
func (r *runningRelay) networkURLs() []string {
	if !r.everywhere || r.scheme != "https" {
		return nil // plain http answers only this machine
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(r.base, "https://"))
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
		out = append(out, "https://"+net.JoinHostPort(ipn.IP.String(), port)+"/")
	}
	return out
}

// openStore opens the relay's store: SQLite in the data folder, or the
// PostgreSQL database at url (postgres://…), migrated to this version's
// schema either way.
func openStore(dir, url string) (*relay.Store, error) {
	if url == "" {
		return relay.OpenStore(filepath.Join(dir, relay.StoreFile))
	}
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return nil, fmt.Errorf("--store %q: give a postgres:// URL (or nothing, for SQLite in the data folder)", redactURL(url))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := relay.OpenPostgres(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", redactURL(url), err)
	}
	return s, nil
}

// redactURL hides a URL's password (in logs and errors).
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return p.Redacted()
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
	return startRelayTransport(listen, dir, log, lim, &transport{})
}

// startRelayTransport is startRelayWith with HTTPS or a proxy (tr).
func startRelayTransport(listen, dir string, log *slog.Logger, lim relay.Limits, tr *transport) (*runningRelay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		hint := "choose another address with --listen"
		if portTaken(err) {
			hint = "the port is taken (another relay running?): " + hint + ", e.g. --listen 127.0.0.1:0 for any free port"
		}
		return nil, fmt.Errorf("listen on %s: %w; %s", listen, err, hint)
	}
	r, err := openRelay(ln, dir, log, lim, tr)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return r, nil
}

func openRelay(ln net.Listener, dir string, log *slog.Logger, lim relay.Limits, tr *transport) (*runningRelay, error) {
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
	store, err := openStore(dir, tr.store)
	if err != nil {
		return nil, err
	}
	rs, err := relay.New(context.Background(), store, log, tokens...)
	if err != nil {
		store.Close()
		return nil, err
	}
	rs.Limits = lim
	rs.Transport = tr.transport
	base, stopConns := context.WithCancel(context.Background())
	addr := ln.Addr().(*net.TCPAddr)
	everywhere := addr.IP.IsUnspecified()
	if everywhere { // the app URL on this machine
		addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: addr.Port}
	}
	scheme := "http"
	if tr.tls() {
		scheme = "https"
	}
	r := &runningRelay{base: scheme + "://" + addr.String(), scheme: scheme, token: token, listening: ln.Addr().String(), everywhere: everywhere, rs: rs, store: store, stopConns: stopConns,
		errc: make(chan error, 1), log: log, srv: rs.HTTPServer(base)}
	if u := tr.transport.PublicURL; u != nil {
		r.public = u.String() + "/"
	}
	capped := rs.Listener(ln)
	if tr.tls() {
		capped = tls.NewListener(capped, tr.tlsConfig())
	}
	r.stopReload = tr.reloadOnHUP(log)
	// The link to the other relays on the same PostgreSQL (none on SQLite).
	fanCtx, stopFan := context.WithCancel(context.Background())
	fanDone := make(chan struct{})
	go func() { defer close(fanDone); rs.RunFanout(fanCtx) }()
	r.stopFan = func() { stopFan(); <-fanDone }
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
	r.stopReload()
	r.stopConns()
	r.rs.Wait()
	r.stopFan()
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

// retainFlag is a duration that also takes days ("30d").
type retainFlag time.Duration

func (f *retainFlag) String() string {
	if *f == 0 {
		return ""
	}
	return time.Duration(*f).String()
}

func (f *retainFlag) Type() string { return "duration" }

func (f *retainFlag) Set(v string) error {
	d, err := parseRetain(v)
	if err != nil {
		return err
	}
	*f = retainFlag(d)
	return nil
}

// parseRetain reads "30d", "12h", "90m": a positive duration, days allowed.
func parseRetain(v string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 100*365 {
			return 0, fmt.Errorf("%q: want a number of days from 1 to 36500 (30d) or a duration (12h)", v)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			return 0, fmt.Errorf("%q: want a positive duration (30d, 12h)", v)
		}
	}
	return d, nil
}

// metricsReadTimeout bounds a metrics request's headers.
const metricsReadTimeout = 10 * time.Second

// serveMetrics serves the relay's metrics at /metrics on an address of
// their own (never the public listener). The returned function stops it.
func serveMetrics(addr string, rl *runningRelay) (func(), error) {
	if addr == rl.listening {
		return nil, fmt.Errorf("--metrics-listen %s: the metrics need an address of their own, not the public one", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", rl.rs.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsReadTimeout}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	return func() { srv.Close(); <-done }, nil
}

// DefaultRelayLogBytes is the size at which serve's --log-file turns over.
const DefaultRelayLogBytes = 8 << 20

// logSize is a size in bytes, given as a number with KB, MB or GB (powers
// of 1024) or none.
type logSize int64

func (z *logSize) String() string {
	switch n := int64(*z); {
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MB"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KB"
	default:
		return strconv.FormatInt(n, 10)
	}
}

func (z *logSize) Set(v string) error {
	num, unit := strings.ToUpper(strings.TrimSpace(v)), int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, unit = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > (1<<40)/unit {
		return fmt.Errorf("%q: want a size such as 8MB or 512KB", v)
	}
	*z = logSize(n * unit)
	return nil
}

func (z *logSize) Type() string { return "size" }

// newLogger logs to w as text or JSON lines.
func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}
