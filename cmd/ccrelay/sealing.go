package main

import (
	"errors"
	"fmt"
	"net"
	neturl "net/url"
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
