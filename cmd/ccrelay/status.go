package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/relay"
)

// statusTimeout bounds status's check that the relay answers.
const statusTimeout = 3 * time.Second

func newStatusCmd() *cobra.Command {
	var relayFlag, state, data string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say where sessions go, whether the relay answers, and whether this machine has a credential for it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return status(cmd.Context(), relayFlag, state, data, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&relayFlag, "relay", "", "the relay's URL (default $CCRELAY_RELAY, or the remembered relay)")
	cmd.Flags().StringVar(&state, "state", "", "state folder (default $XDG_STATE_HOME/ccrelay)")
	cmd.Flags().StringVar(&data, "data", "", "the data folder of a relay on this machine (for its token)")
	return cmd
}

// status prints four lines: where sessions go and why, whether the relay
// answers (within statusTimeout), which credential this machine would use
// for it, and whether sessions of plain claude are followed. A relay that does not answer is reported, not an error.
func status(ctx context.Context, relayFlag, stateFlag, data string, out io.Writer) error {
	state, err := stateDir(stateFlag)
	if err != nil {
		return err
	}
	url, src, err := chooseRelay(relayFlag, state)
	if err != nil {
		return err
	}
	if url == "" {
		fmt.Fprintf(out, "sessions: recorded to files in %s (no relay set up)\n", filepath.Join(state, "projects"))
		fmt.Fprintln(out, "next: run ccrelay setup (a relay here, and the phone paired), or ccrelay login with a code of ccrelay pair --machine from the relay's machine, or set "+config.EnvRelay)
		plainClaude(out)
		return nil
	}
	fmt.Fprintf(out, "sessions: relayed to %s (from %s)\n", url, sourceName(src, state))
	fmt.Fprintf(out, "relay: %s\n", relayAnswers(ctx, url))
	fmt.Fprintf(out, "credential: %s\n", credentialFor(url, state, data))
	plainClaude(out)
	return nil
}

// plainClaude says whether sessions of plain claude are followed (ccrelay
// follow install).
func plainClaude(out io.Writer) {
	followed, path, err := followState()
	switch {
	case err != nil:
		fmt.Fprintf(out, "plain claude: %v\n", err)
	case followed:
		fmt.Fprintf(out, "plain claude: followed (the hook is in %s; ccrelay follow uninstall takes it out)\n", path)
	default:
		fmt.Fprintf(out, "plain claude: not followed (ccrelay follow install adds the hook to %s)\n", path)
	}
}

// relayAnswers asks the relay's /healthz and says what came back.
func relayAnswers(ctx context.Context, url string) string {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return "not asked: " + apiclient.Explain(url, err)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "does not answer: " + apiclient.Explain(url, err)
	}
	resp.Body.Close()
	if gw := apiclient.Gateway(resp.StatusCode); gw != nil {
		return "does not answer: " + apiclient.Explain(url, gw)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("something answers, but not as a relay (HTTP %d at /healthz): is that the relay's address?", resp.StatusCode)
	}
	return fmt.Sprintf("answers (in %d ms)", time.Since(start).Milliseconds())
}

// credentialFor says which credential a command would send to url, in the
// order relayToken looks (without a token flag).
func credentialFor(url, state, data string) string {
	if os.Getenv("CCRELAY_TOKEN") != "" {
		return "$CCRELAY_TOKEN"
	}
	if l, err := readLogin(state); err == nil {
		if l.Relay == url {
			return fmt.Sprintf("this machine's login as %q (%s)", l.Name, filepath.Join(state, LoginFile))
		}
		return fmt.Sprintf("this machine's login as %q is for %s, not this relay: run ccrelay login %s CODE (a code from ccrelay pair --machine)", l.Name, l.Relay, url)
	}
	if dir, err := dataDir(data); err == nil {
		if _, err := os.Stat(filepath.Join(dir, relay.TokenFile)); err == nil {
			return "the token of the relay on this machine (" + filepath.Join(dir, relay.TokenFile) + ")"
		}
	}
	return "none: run ccrelay login " + url + " CODE (a code from ccrelay pair --machine on a machine set up), or give --relay-token-file"
}
