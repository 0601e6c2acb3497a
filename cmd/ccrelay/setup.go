package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// setupFlags are ccrelay setup's choices.
type setupFlags struct {
	tailscale, lan bool
	acme           string
	acmeDirectory  string
	listen         string
	port           int
	lanAddress     string
	state          string
}

// DefaultPort is the relay's port when ccrelay setup runs it (not with
// --acme, which needs 443).
const DefaultPort = 8707

// setupRelayWait bounds how long setup waits for the relay service it
// started to answer.
const setupRelayWait = 30 * time.Second

func newSetupCmd() *cobra.Command {
	var f setupFlags
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "From nothing to a paired phone: run the relay as a service, make it reachable over HTTPS, pair the phone",
		Long: `Setup starts the relay as a service of this user (systemd, launchd or a
Windows logon task; a relay it started before is used again), makes it
reachable by the phone over HTTPS, remembers it as this machine's relay,
and pairs a phone: it prints the QR code, waits for the phone, and confirms
its key. From then on run ccrelay where you would run claude.

How the phone reaches the relay:
  Tailscale   when tailscale is installed and logged in (or --tailscale):
              tailscale serve puts the relay at this machine's tailnet name,
              with a real certificate; only your tailnet's devices reach it.
  --acme D    a public server with a DNS name D pointing at it and port 443
              open: a Let's Encrypt certificate.
  LAN         otherwise (or --lan): a certificate from a certificate
              authority of this machine's own, for its LAN address and
              127.0.0.1; the phone, on the same network, trusts that
              authority once (setup says how).

docs/deploy.md says what each exposes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return setup(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&f.tailscale, "tailscale", false, "reach the relay through tailscale serve (the default when tailscale is installed and logged in)")
	cmd.Flags().BoolVar(&f.lan, "lan", false, "reach the relay on the local network with a certificate of this machine's own authority")
	cmd.Flags().StringVar(&f.acme, "acme", "", "a public server: serve on port 443 with a Let's Encrypt certificate for this DNS name")
	cmd.Flags().StringVar(&f.acmeDirectory, "acme-directory", "", "with --acme: the ACME server's directory URL (default: Let's Encrypt)")
	cmd.Flags().StringVar(&f.listen, "listen", "", "with --acme: the address the relay listens on (default :443, where Let's Encrypt checks the name)")
	cmd.Flags().IntVar(&f.port, "port", DefaultPort, "the relay's port (Tailscale and LAN)")
	cmd.Flags().StringVar(&f.lanAddress, "lan-address", "", "the address or name the phone opens on the LAN (default: this machine's first network address)")
	cmd.Flags().StringVar(&f.state, "state", "", "state folder (default $XDG_STATE_HOME/ccrelay)")
	return cmd
}

// reach is how the phone and this machine reach the relay, and what the
// relay is run with for it.
type reach struct {
	how       string   // "Tailscale", "the LAN", "Let's Encrypt"
	serve     []string // serve's flags, after --data
	listen    string   // the address the relay listens on
	local     string   // the URL this machine uses (remembered)
	ca        string   // the CA file to trust for local ("" for the system's)
	phone     string   // the URL phones open
	renewed   bool     // the certificate is new: a running relay must read it again
	expose    func(ctx context.Context, out io.Writer) error
	phoneStep string // what to do on the phone before scanning ("" for nothing)
}

func setup(ctx context.Context, f setupFlags, out, errOut io.Writer) error {
	chosen := 0
	for _, on := range []bool{f.tailscale, f.lan, f.acme != ""} {
		if on {
			chosen++
		}
	}
	if chosen > 1 {
		return errors.New("choose one of --tailscale, --lan and --acme")
	}
	if f.acme == "" && (f.acmeDirectory != "" || f.listen != "") {
		return errors.New("--acme-directory and --listen go with --acme (the other ways take --port)")
	}
	if f.port <= 0 || f.port > 65535 {
		return fmt.Errorf("--port %d: give a port from 1 to 65535", f.port)
	}
	self, err := serviceBinary()
	if err != nil {
		return err
	}
	state, err := stateDir(f.state)
	if err != nil {
		return err
	}
	data, err := dataDir("")
	if err != nil {
		return err
	}
	if data, err = filepath.Abs(data); err != nil {
		return err
	}
	r, err := chooseReach(ctx, f, data, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "1. The relay, reached through %s at %s\n", r.how, r.phone)
	if r.ca != "" {
		if err := trustCA(r.ca); err != nil {
			return err
		}
	}
	if err := runRelayService(ctx, r, self, data, out); err != nil {
		return err
	}
	cred, err := relayToken("", "", data, state, r.local, errOut)
	if err != nil {
		return err
	}
	key, err := machineKey(state)
	if err != nil {
		return err
	}
	code, err := requestPairCode(ctx, r.local, cred, "device", key)
	if err != nil {
		return fmt.Errorf("the relay at %s refused a pairing code: %w", r.local, err)
	}
	if !strings.HasPrefix(code.URL, "https://") {
		return fmt.Errorf("the relay running at %s gives phones the address %s, which is not HTTPS: a relay of your own runs there; stop it (ccrelay setup then runs one as a service), or run setup with --port to use another port", r.local, code.URL)
	}
	// Exposed only once the relay is known to be the one set up for it.
	if r.expose != nil {
		if err := r.expose(ctx, out); err != nil {
			return err
		}
	}
	if err := rememberRelay(state, r.local, r.ca, out); err != nil {
		return err
	}
	fmt.Fprintln(out, "\n2. The phone")
	if r.phoneStep != "" {
		fmt.Fprintln(out, r.phoneStep)
	}
	if _, err := pairPhone(ctx, out, errOut, state, key, r.local, cred, code, false); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n3. Done. From now on run ccrelay where you would run claude, with the same flags; the phone follows:\n\n  ccrelay\n\n")
	fmt.Fprintf(out, "Sessions of plain claude (another terminal, an editor) can be followed too, read-only on the phone:\n\n  ccrelay follow install\n\n")
	return nil
}

// chooseReach picks how the phone reaches the relay: the choice given,
// else Tailscale when it is installed and logged in, else the LAN.
func chooseReach(ctx context.Context, f setupFlags, data string, out io.Writer) (reach, error) {
	switch {
	case f.acme != "":
		return acmeReach(ctx, f, data)
	case f.lan:
		return lanReach(f, data)
	case f.tailscale:
		return tailscaleReach(ctx, f.port)
	}
	if _, err := lookTailscale(); err != nil {
		fmt.Fprintln(out, "Tailscale is not installed: the phone reaches the relay on this network (--lan).")
		return lanReach(f, data)
	}
	st, err := tailscaleState(ctx)
	if err == nil && st.BackendState != "Running" {
		err = fmt.Errorf("it is %s, not logged in (run tailscale up)", st.BackendState)
	}
	if err != nil {
		fmt.Fprintf(out, "Tailscale is installed but not in use (%v): the phone reaches the relay on this network (--lan). For Tailscale, log in and run ccrelay setup --tailscale.\n", err)
		return lanReach(f, data)
	}
	return tailscaleReachWith(st, f.port)
}

// runRelayService makes sure the relay runs as this user's service with
// r's flags and answers at r.local: a relay already answering there with
// the same service is used as it is; one with another service file (or a
// new certificate) is restarted with the new one; a port taken by another
// program is an error that says so.
func runRelayService(ctx context.Context, r reach, self, data string, out io.Writer) error {
	env, err := currentServiceEnv(append([]string{self, "serve", "--data", data}, r.serve...))
	if err != nil {
		return err
	}
	env.ID = relayService
	svc, err := serviceFor(env)
	if err != nil {
		return fmt.Errorf("%w (ccrelay setup runs the relay as a service; run ccrelay serve %s yourself, then ccrelay pair)", err, strings.Join(r.serve, " "))
	}
	old, _ := os.ReadFile(svc.Path)
	same := string(old) == svc.Content
	answering := relayHealthy(ctx, r.local) == nil
	switch {
	case answering && same && !r.renewed:
		fmt.Fprintf(out, "   A relay with the flags of %s answers already: using it as it is.\n", svc.Path)
		return nil
	case answering && old == nil:
		// Not ours: pairing says whether phones can reach it.
		fmt.Fprintf(out, "   A relay answers at %s already: using it.\n", r.local)
		return nil
	case !answering:
		if err := portFree(r.listen); err != nil {
			return err
		}
	}
	if old != nil {
		for _, c := range svc.Disable { // stopped, to start again with the new file
			if err := runner(c[0], c[1:]...); err != nil {
				fmt.Fprintf(out, "   stopping the relay's service: %v\n", err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(svc.Path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(svc.Path, []byte(svc.Content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", svc.Path, err)
	}
	for _, c := range svc.Enable {
		if err := runner(c[0], c[1:]...); err != nil {
			serve := "ccrelay serve " + strings.Join(r.serve, " ")
			if noUserServices(err) {
				return fmt.Errorf("%s is written, but this user has no systemd of its own here (%w): over ssh, run loginctl enable-linger $USER, log in again and run ccrelay setup again; in a container, run the relay yourself and keep it running: %s, then run ccrelay setup again (it uses a relay that answers)", svc.Path, err, serve)
			}
			return fmt.Errorf("%s is written, but starting it failed: %w; run %s yourself to see why", svc.Path, err, serve)
		}
	}
	fmt.Fprintf(out, "   The relay runs as a service of yours: %s (it starts at every login%s).\n", svc.Path, lingerNote())
	deadline := time.Now().Add(setupRelayWait)
	for {
		err := relayHealthy(ctx, r.local)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the relay's service started, but the relay does not answer at %s after %v (%v): %s", r.local, setupRelayWait, err, serviceLogHint())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// noUserServices: err (from a service manager's command) says the user
// has no service manager of their own here.
func noUserServices(err error) bool {
	s := err.Error()
	return runtime.GOOS == "linux" && (strings.Contains(s, "Failed to connect to bus") || strings.Contains(s, "executable file not found") || strings.Contains(s, "System has not been booted with systemd"))
}

// lingerNote says, on Linux, how the service keeps running without a
// login.
func lingerNote() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	return "; loginctl enable-linger $USER keeps it running when you are logged out"
}

// serviceLogHint says where the relay service's messages are.
func serviceLogHint() string {
	switch runtime.GOOS {
	case "linux":
		return "see why with: journalctl --user -u " + relayService.unit
	case "darwin":
		return "see why in ~/Library/Logs/ccrelay-" + relayService.file + ".log"
	}
	return "run the command of the task " + relayService.task + " in a terminal to see why"
}

// relayHealthy asks url's /healthz once.
func relayHealthy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d at /healthz", resp.StatusCode)
	}
	return nil
}

// portFree says, when the relay cannot listen on addr, why and what to do.
func portFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln.Close()
	}
	_, port, _ := net.SplitHostPort(addr)
	if addrInUse(err) {
		return fmt.Errorf("port %s is taken by a program that is not a relay of ccrelay setup's (another ccrelay serve?): stop it, or run setup with --port to choose another port", port)
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("this user may not listen on port %s (%v): on Linux allow it with: sudo setcap cap_net_bind_service=+ep %s; or use another way (Tailscale, --lan)", port, err, selfPath())
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}

func selfPath() string {
	p, err := os.Executable()
	if err != nil {
		return "ccrelay"
	}
	return p
}

// loopbackURL is the relay's URL on this machine at port.
func loopbackURL(scheme string, port int) string {
	return scheme + "://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
