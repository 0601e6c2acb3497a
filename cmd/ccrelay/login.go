package main

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/spf13/cobra"
)

// LoginFile is where `ccrelay login` keeps this machine's relay and
// credential, in the state folder (mode 0600).
const LoginFile = "login.json"

// MachineKeyFile is this machine's X25519 private key, in the state folder
// (mode 0600). Its public key goes with pairing codes and logins, for
// end-to-end encryption.
const MachineKeyFile = "machine.key"

// apiTimeout bounds each call of pair, login and devices to the relay.
const apiTimeout = 30 * time.Second

// login is a machine's credential for a relay.
type login struct {
	Relay      string `json:"relay"`
	Credential string `json:"credential"`
	Name       string `json:"name"`
}

func readLogin(state string) (login, error) {
	var l login
	b, err := os.ReadFile(filepath.Join(state, LoginFile))
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil || l.Credential == "" {
		return l, fmt.Errorf("%s: not a login file (%v); run ccrelay login again", filepath.Join(state, LoginFile), err)
	}
	return l, nil
}

// writePrivate writes b to path with mode 0600, atomically.
func writePrivate(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// machineKey loads this machine's X25519 key from the state folder,
// making it on first use, in the key file format of docs/security.md (a key
// of the older raw form is read and rewritten in it). A key file that group
// or others may read is refused: the key may have leaked.
func machineKey(state string) (*ecdh.PrivateKey, error) {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("machine key: %w", err)
	}
	// Made once: two ccrelay starting together make one key (the other
	// reads it); a key that changed would no longer match the devices'.
	k, _, err := seal.LoadOrCreateKeyPair(filepath.Join(state, MachineKeyFile))
	if err != nil {
		return nil, fmt.Errorf("machine key: %w", err)
	}
	return k.Private(), nil
}

// relayError is a relay's refusal of a call, with its status.
type relayError struct {
	status int
	text   string
}

func (e *relayError) Error() string { return e.text }

// relayCall makes a JSON request to the relay and decodes its JSON answer;
// a refusal is an error with the relay's own words.
func relayCall(ctx context.Context, method, url, cred string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return &apiclient.ReachError{URL: url, Err: err}
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &apiclient.ReachError{URL: url, Err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if gw := apiclient.Gateway(resp.StatusCode); gw != nil {
		return &apiclient.ReachError{URL: url, Err: gw}
	}
	if resp.StatusCode != http.StatusOK {
		return &relayError{status: resp.StatusCode, text: fmt.Sprintf("relay refused (%s): %s", resp.Status, strings.TrimSpace(string(b)))}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("relay answer: %w", err)
		}
	}
	return nil
}

func newLoginCmd() *cobra.Command {
	var state, name, ca string
	cmd := &cobra.Command{
		Use:   "login RELAY-URL CODE",
		Short: "Log this machine in to a relay with a code from `ccrelay pair --machine`",
		Long: `Login gives this machine a credential of its own for a relay: run
"ccrelay pair --machine" on a machine already set up, then this command with
the relay's URL and the code it printed. The credential is kept in the state
folder (mode 0600); ccrelay uses it from then on.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			relayURL, err := apiclient.CheckURL(args[0])
			if err != nil {
				return err
			}
			if ca != "" {
				if err := trustCA(ca); err != nil {
					return err
				}
			}
			dir, err := stateDir(state)
			if err != nil {
				return err
			}
			key, err := machineKey(dir)
			if err != nil {
				return err
			}
			if name = protocol.CleanName(name, relay.MaxCredentialName); name == "" {
				host, _ := os.Hostname()
				name = protocol.CleanName(host, relay.MaxCredentialName)
			}
			var ans struct {
				Credential, Name, Role string
			}
			if err := relayCall(cmd.Context(), "POST", relayURL+"/api/pair/redeem", "", map[string]any{"code": args[1], "name": name, "publicKey": key.PublicKey().Bytes()}, &ans); err != nil {
				return err
			}
			ans.Name = protocol.CleanName(ans.Name, 0) // whatever the relay sent
			if ans.Role != "machine" {
				return fmt.Errorf("the code was for a %s, not a machine: make one with ccrelay pair --machine (the device credential made with it is unused; revoke %q with ccrelay devices revoke)", ans.Role, ans.Name)
			}
			b, _ := json.MarshalIndent(login{Relay: relayURL, Credential: ans.Credential, Name: ans.Name}, "", "  ")
			if err := writePrivate(filepath.Join(dir, LoginFile), b); err != nil {
				return fmt.Errorf("save the login: %w", err)
			}
			if err := rememberRelay(dir, relayURL, caToRemember(ca, relayURL), io.Discard); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "This machine is %q on %s, remembered as its relay. Run ccrelay where you would run claude.\n", ans.Name, relayURL)
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "state folder (default $XDG_STATE_HOME/ccrelay)")
	cmd.Flags().StringVar(&ca, "ca", "", "a PEM file of the authority that signed the relay's certificate, when this machine does not trust it (remembered with the relay)")
	cmd.Flags().StringVar(&name, "name", "", "this machine's name (default: its host name)")
	return cmd
}
