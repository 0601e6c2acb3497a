package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/internal/config"
)

// chooseRelay picks the relay a command talks to: --relay (flag), else
// $CCRELAY_RELAY, else the one remembered in the state folder by ccrelay
// pair or ccrelay login. "" means none is set up. The remembered CA file,
// if any, is trusted for the rest of the process when the relay chosen is
// the remembered one, and only then: the holder of a private authority one
// relay was reached with is not trusted to be any other relay.
func chooseRelay(flag, state string) (string, config.Source, error) {
	cfg, err := config.Load(state)
	if err != nil {
		return "", config.FromNone, err
	}
	url, src := config.Resolve(flag, os.Getenv, cfg)
	if url == "" {
		return "", src, nil
	}
	checked, err := apiclient.CheckURL(url)
	if err != nil {
		return "", src, fmt.Errorf("%s: %w", sourceName(src, state), err)
	}
	if cfg.CAFile != "" {
		if remembered, err := apiclient.CheckURL(cfg.Relay); err == nil && remembered == checked {
			if err := trustCA(cfg.CAFile); err != nil {
				return "", src, err
			}
		}
	}
	return checked, src, nil
}

// sourceName says where a relay URL came from, for messages.
func sourceName(src config.Source, state string) string {
	switch src {
	case config.FromFlag:
		return "--relay"
	case config.FromEnv:
		return "$" + config.EnvRelay
	case config.FromConfig:
		return "the relay remembered in " + config.Path(state)
	}
	return "no relay"
}

// trustCA makes every request of this process (HTTP calls and the relay's
// websocket) trust the certificates of the PEM file caFile as well as the
// system's.
func trustCA(caFile string) error {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return fmt.Errorf("the relay's CA file %s cannot be used by this build", caFile)
	}
	return config.TrustCA(t, caFile)
}

// caToRemember is the CA file a relay was reached with, to be remembered
// with it: --ca, else $SSL_CERT_FILE for an https relay, as an absolute
// path; "" for none.
func caToRemember(caFlag, relayURL string) string {
	ca := caFlag
	if ca == "" && strings.HasPrefix(relayURL, "https://") {
		ca = os.Getenv("SSL_CERT_FILE")
	}
	if ca == "" {
		return ""
	}
	if abs, err := filepath.Abs(ca); err == nil {
		return abs
	}
	return ca
}

// rememberRelay records relayURL (and its CA file) as the state folder's
// relay, and says so.
func rememberRelay(state, relayURL, caFile string, out io.Writer) error {
	cfg, err := config.Load(state)
	if err != nil {
		return err
	}
	if cfg.Relay == relayURL && cfg.CAFile == caFile {
		return nil
	}
	if err := config.Remember(state, relayURL, caFile); err != nil {
		return err
	}
	fmt.Fprintf(out, "Remembered %s as this machine's relay (in %s): plain ccrelay relays to it.\n", relayURL, config.Path(state))
	return nil
}
