package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/internal/localca"
)

// tailscaleTimeout bounds tailscale status; tailscaleServeTimeout bounds
// tailscale serve, which may wait for the person to turn Serve on in the
// admin console (it prints the link).
const (
	tailscaleTimeout      = 10 * time.Second
	tailscaleServeTimeout = 3 * time.Minute
)

// tsStatus is what setup reads of tailscale status --json.
type tsStatus struct {
	BackendState string
	Self         *struct {
		DNSName string
	}
	// CertDomains are the names the tailnet gives this machine
	// certificates for: none when HTTPS certificates are off.
	CertDomains []string
}

func lookTailscale() (string, error) { return exec.LookPath("tailscale") }

// tailscaleState runs tailscale status --json.
func tailscaleState(ctx context.Context) (tsStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, tailscaleTimeout)
	defer cancel()
	var so, se bytes.Buffer
	cmd := exec.CommandContext(ctx, "tailscale", "status", "--json")
	cmd.Stdout, cmd.Stderr = &so, &se
	runErr := cmd.Run()
	var st tsStatus
	// tailscale status exits 1 when logged out, with the JSON all the same.
	if err := json.Unmarshal(so.Bytes(), &st); err != nil || st.BackendState == "" {
		if runErr == nil {
			runErr = fmt.Errorf("its answer is not the JSON expected (%v)", err)
		}
		return st, fmt.Errorf("tailscale status: %w: %s (is tailscaled running?)", runErr, strings.TrimSpace(se.String()))
	}
	return st, nil
}

// tailscaleReach puts the relay on this machine's loopback at port, behind
// tailscale serve at the tailnet name.
func tailscaleReach(ctx context.Context, port int) (reach, error) {
	if _, err := lookTailscale(); err != nil {
		return reach{}, errors.New("tailscale is not installed (https://tailscale.com/download): install it and log in on this machine and the phone, then run ccrelay setup again; or use ccrelay setup --lan")
	}
	st, err := tailscaleState(ctx)
	if err != nil {
		return reach{}, fmt.Errorf("%w; or use ccrelay setup --lan", err)
	}
	return tailscaleReachWith(st, port)
}

// tailscaleReachWith is tailscaleReach with tailscale's status st.
func tailscaleReachWith(st tsStatus, port int) (reach, error) {
	if st.BackendState != "Running" {
		return reach{}, fmt.Errorf("tailscale is %s, not logged in: run tailscale up, then ccrelay setup again; or use ccrelay setup --lan", st.BackendState)
	}
	if len(st.CertDomains) == 0 {
		return reach{}, errors.New("your tailnet gives this machine no HTTPS certificate: turn on MagicDNS and HTTPS Certificates in the Tailscale admin console (https://login.tailscale.com/admin/dns), then run ccrelay setup again; or use ccrelay setup --lan")
	}
	name := strings.TrimSuffix(st.CertDomains[0], ".")
	if !validName(name) {
		// It becomes the phones' URL, the service's --public-url and
		// the QR code's link: a host name, nothing else.
		return reach{}, fmt.Errorf("tailscale gives this machine the name %q, which is not a host name: check tailscale status; or use ccrelay setup --lan", name)
	}
	phone := "https://" + name
	local := loopbackURL("http", port)
	target := local
	return reach{how: "Tailscale", phone: phone, local: local,
		listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		serve:  []string{"--listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "--behind-proxy", "127.0.0.1", "--public-url", phone},
		expose: func(ctx context.Context, out io.Writer) error {
			return tailscaleServe(ctx, target, phone, out)
		},
		phoneStep: "   The phone needs Tailscale running, logged in to the same tailnet.",
	}, nil
}

// tailscaleServe runs tailscale serve in the background in front of
// target (it keeps serving across restarts), showing what it says.
func tailscaleServe(ctx context.Context, target, phone string, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, tailscaleServeTimeout)
	defer cancel()
	var said bytes.Buffer
	cmd := exec.CommandContext(ctx, "tailscale", "serve", "--bg", target)
	w := io.MultiWriter(&said, indent{out})
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		hint := "see what it said above; or use ccrelay setup --lan"
		if strings.Contains(strings.ToLower(said.String()), "access denied") {
			hint = "allow this user to run it with: sudo tailscale set --operator=$USER, then run ccrelay setup again"
		}
		return fmt.Errorf("tailscale serve --bg %s failed (%v): %s", target, err, hint)
	}
	fmt.Fprintf(out, "   tailscale serve puts it at %s, for your tailnet only (tailscale serve reset stops that).\n", phone)
	return nil
}

// indent writes what a command says indented under setup's lines.
type indent struct{ w io.Writer }

func (i indent) Write(p []byte) (int, error) {
	s := strings.TrimRight(string(p), "\n")
	if s != "" {
		fmt.Fprintln(i.w, "   "+strings.ReplaceAll(s, "\n", "\n   "))
	}
	return len(p), nil
}

// lanReach serves the relay on every address with a certificate from this
// machine's own authority for the LAN address, this machine's names and
// 127.0.0.1: the phone opens the LAN address, this machine 127.0.0.1.
func lanReach(f setupFlags, data string) (reach, error) {
	addr := f.lanAddress
	if addr == "" {
		a, err := lanAddress()
		if err != nil {
			return reach{}, err
		}
		addr = a
	}
	hosts := []string{addr}
	if h, err := os.Hostname(); err == nil && validName(h) && !strings.EqualFold(h, addr) {
		hosts = append(hosts, h)
		if !strings.Contains(h, ".") {
			hosts = append(hosts, h+".local")
		}
	}
	hosts = append(hosts, "127.0.0.1", "localhost")
	files, made, err := localca.Ensure(data, hosts, time.Now())
	if err != nil {
		return reach{}, fmt.Errorf("the LAN certificate: %w", err)
	}
	fp, err := localca.Fingerprint(files.CA)
	if err != nil {
		return reach{}, err
	}
	port := strconv.Itoa(f.port)
	phone := "https://" + net.JoinHostPort(addr, port)
	step := fmt.Sprintf(`   The phone must be on this network and trust this machine's certificate authority once:
   send it %s (mail, AirDrop, a USB cable) and open it there;
   its SHA-256 fingerprint is %s.
     iPhone:  Settings > General > VPN & Device Management: install it; then
              Settings > General > About > Certificate Trust Settings: turn it on.
     Android: Settings > Security > Encryption & credentials > Install a certificate > CA certificate.
   Then scan the code.`, files.CA, fp)
	if open, err := localca.Unconstrained(files.CA); err == nil && open {
		step += fmt.Sprintf(`
   Note: this authority was made by an earlier ccrelay without name constraints: a phone
   that trusts it trusts its key for every site. To replace it with one limited to this
   network, remove %s and %s, run ccrelay setup again,
   trust the new authority on the phone and remove the old one there.`, files.CA, files.CAKey)
	}
	return reach{how: "the LAN", phone: phone, local: loopbackURL("https", f.port), ca: files.CA, renewed: made,
		listen:    net.JoinHostPort("0.0.0.0", port),
		serve:     []string{"--listen", net.JoinHostPort("0.0.0.0", port), "--tls-cert", files.Cert, "--tls-key", files.Key, "--public-url", phone},
		phoneStep: step}, nil
}

// lanAddress is this machine's first IPv4 address on a network: what a
// phone on the same network opens.
func lanAddress() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("this machine's network addresses: %w (give the one the phone opens with --lan-address)", err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("this machine has no network address a phone could open: connect it to the phone's network (Wi-Fi), give the address with --lan-address, or use Tailscale")
}

// validName: a host name a certificate can hold.
func validName(h string) bool {
	if h == "" || len(h) > 253 || net.ParseIP(h) != nil {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// acmeReach serves the relay on f.listen (default :443) with a
// certificate from Let's Encrypt (or the ACME server of
// f.acmeDirectory) for f.acme, checked first (the name resolves, the ACME
// server answers, the address can be listened on).
func acmeReach(ctx context.Context, f setupFlags, data string) (reach, error) {
	domain := f.acme
	if !validName(domain) || !strings.Contains(domain, ".") {
		return reach{}, fmt.Errorf("--acme %q: give the server's DNS name, e.g. relay.example.com", domain)
	}
	listen := f.listen
	if listen == "" {
		listen = ":443"
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return reach{}, fmt.Errorf("--listen %q: give an address and port, e.g. :443 or 203.0.113.7:443", listen)
	}
	if _, err := (serveOptions{acme: domain, acmeDirectory: f.acmeDirectory}).prepare(ctx, data); err != nil {
		return reach{}, err
	}
	serve := []string{"--listen", listen, "--acme", domain}
	if f.acmeDirectory != "" {
		serve = append(serve, "--acme-directory", f.acmeDirectory)
	}
	url := "https://" + domain
	return reach{how: "Let's Encrypt", phone: url, local: url, listen: listen, serve: serve}, nil
}
