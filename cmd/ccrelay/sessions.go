package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/spf13/cobra"
)

// sessionsTimeout bounds each request of `ccrelay sessions`.
const sessionsTimeout = 30 * time.Second

// maxSessionsAnswer bounds what `ccrelay sessions ls` reads from the relay.
const maxSessionsAnswer = 64 << 20

type sessionsFlags struct {
	relay, token, tokenFile, data string
}

func newSessionsCmd() *cobra.Command {
	var f sessionsFlags
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List or delete the sessions a relay keeps for this token",
	}
	cmd.PersistentFlags().StringVar(&f.relay, "relay", "", "the relay's URL (default $CCRELAY_RELAY, the remembered relay, or http://"+DefaultListen+")")
	cmd.PersistentFlags().StringVar(&f.token, "relay-token", "", "the relay's token (visible in ps: prefer --relay-token-file; default $CCRELAY_TOKEN, or the token of a relay on this machine)")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "relay-token-file", "", "read the relay's token from this file (mode 0600)")
	cmd.PersistentFlags().StringVar(&f.data, "data", "", "the data folder of a relay on this machine, to read its token from (default $XDG_DATA_HOME/ccrelay)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the sessions: id, last activity, envelopes, first prompt",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sessionsList(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID…",
		Short: "Delete sessions: their envelopes and commands are removed from the relay for good",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionsRemove(cmd.Context(), &f, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.AddCommand(ls, rm)
	return cmd
}

func (f *sessionsFlags) request(ctx context.Context, method, path string, stderr io.Writer) (*http.Response, error) {
	state, err := stateDir("")
	if err != nil {
		return nil, err
	}
	relayURL, _, err := chooseRelay(f.relay, state)
	if err != nil {
		return nil, err
	}
	if relayURL == "" {
		relayURL = "http://" + DefaultListen
	}
	f.relay = relayURL
	// The credential is chosen for the relay in use, once it is known.
	tok, err := relayToken(f.token, f.tokenFile, f.data, "", f.relay, stderr)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(f.relay, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := (&http.Client{Timeout: sessionsTimeout}).Do(req)
	if err != nil {
		return nil, &apiclient.ReachError{URL: f.relay, Err: err}
	}
	if res.StatusCode == http.StatusUnauthorized {
		res.Body.Close()
		return nil, fmt.Errorf("the relay at %s refused the token", f.relay)
	}
	if gw := apiclient.Gateway(res.StatusCode); gw != nil {
		res.Body.Close()
		return nil, &apiclient.ReachError{URL: f.relay, Err: gw}
	}
	return res, nil
}

func sessionsList(ctx context.Context, f *sessionsFlags, stdout, stderr io.Writer) error {
	res, err := f.request(ctx, http.MethodGet, "/sessions", stderr)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		return fmt.Errorf("list sessions: %s: %s", res.Status, strings.TrimSpace(string(b)))
	}
	var a struct {
		Sessions []protocol.SessionSummary `json:"sessions"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxSessionsAnswer)).Decode(&a); err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLAST ACTIVITY\tENVELOPES\tPROMPT")
	for _, s := range a.Sessions {
		prompt := strings.Join(strings.Fields(s.Prompt), " ")
		if r := []rune(prompt); len(r) > 60 {
			prompt = string(r[:59]) + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.ID, time.UnixMilli(s.Updated).UTC().Format(time.RFC3339), s.LastSeq, prompt)
	}
	return tw.Flush()
}

func sessionsRemove(ctx context.Context, f *sessionsFlags, ids []string, stdout, stderr io.Writer) error {
	var failed int
	for _, id := range ids {
		res, err := f.request(ctx, http.MethodDelete, "/sessions/"+url.PathEscape(id), stderr)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		if res.StatusCode == http.StatusNoContent {
			fmt.Fprintf(stdout, "deleted %s\n", id)
			continue
		}
		failed++
		fmt.Fprintf(stderr, "ccrelay: %s: %s\n", id, strings.TrimSpace(string(b)))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d sessions not deleted", failed, len(ids))
	}
	return nil
}
