package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccrelay/ccrelay/apiclient"
)

// openKeyring opens the machine's end-to-end keyring in its state folder
// (its key pair, the devices it trusts, the sessions' keys).
func openKeyring(state string) (*apiclient.Keyring, error) {
	key, err := machineKey(state)
	if err != nil {
		return nil, err
	}
	return apiclient.OpenKeyring(state, key)
}

// relayRun is what a run that relays its sessions opens first: the
// relay's token, the keyring that seals for the devices this machine
// trusts, and the run's outbox (box; the caller closes it).
type relayRun struct {
	token string
	kr    *apiclient.Keyring
	box   *apiclient.Outbox
}

// openRelayRun opens a relayRun for relayURL in runDir, refusing to send
// plaintext to another machine's relay unless plaintext is asked for.
func openRelayRun(relayURL, tokenFlag, tokenFile string, plaintext bool, state, runDir string, log *slog.Logger) (relayRun, error) {
	token, err := relayToken(tokenFlag, tokenFile, "", state, relayURL, os.Stderr)
	if err != nil {
		return relayRun{}, err
	}
	kr, err := openKeyring(state)
	if err != nil {
		return relayRun{}, err
	}
	if err := checkPlaintext(relayURL, kr, plaintext); err != nil {
		return relayRun{}, err
	}
	box, err := apiclient.OpenOutboxWith(filepath.Join(runDir, "outbox"), apiclient.OutboxOptions{Logger: log, Sealer: kr, Relay: relayURL})
	if err != nil {
		return relayRun{}, err
	}
	return relayRun{token: token, kr: kr, box: box}, nil
}

// errPlaintext: sessions would reach a relay on another machine unsealed.
var errPlaintext = errors.New("no device is paired with this machine, so sessions would reach a relay on another machine unencrypted, readable by whoever runs it")

// checkPlaintext refuses to send plaintext to a relay that is not on this
// machine (docs/security.md, "Who seals"): the machine must trust a device
// (ccrelay pair) so that sessions are sealed, unless plaintext is asked for
// (--plaintext).
func checkPlaintext(relayURL string, kr *apiclient.Keyring, plaintext bool) error {
	if plaintext || isLoopbackURL(relayURL) {
		return nil
	}
	trusted, err := kr.Trusted()
	if err != nil {
		return err
	}
	if len(trusted) > 0 {
		return nil
	}
	return fmt.Errorf("%w (%s): pair a phone first with ccrelay pair, or pass --plaintext to send anyway", errPlaintext, relayURL)
}

// isLoopbackURL reports whether u names this machine: localhost or a
// loopback address.
func isLoopbackURL(u string) bool {
	p, err := neturl.Parse(u)
	if err != nil {
		return false
	}
	host := p.Hostname()
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
