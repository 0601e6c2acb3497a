package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ccrelay/ccrelay/apiclient"
	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/protocol"
)

func newDevicesCmd() *cobra.Command {
	var mf machineFlags
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the machines and devices of the relay (revoke, rename)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, cred, err := mf.resolve(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var list []struct {
				Name     string `json:"name"`
				Role     string `json:"role"`
				LastSeen int64  `json:"lastSeen"`
				Address  string `json:"address"`
			}
			if err := relayCall(cmd.Context(), "GET", url+"/api/devices", cred, nil, &list); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tLAST SEEN\tADDRESS")
			for _, d := range list {
				seen := "never"
				if d.LastSeen > 0 {
					seen = time.UnixMilli(d.LastSeen).Format("2006-01-02 15:04")
				}
				// What the relay says is shown without control or
				// bidirectional characters (a name cannot pose as another).
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", protocol.CleanName(d.Name, 0), protocol.CleanName(d.Role, 0), seen, protocol.CleanName(d.Address, 0))
			}
			return tw.Flush()
		},
	}
	addMachineFlags(cmd, &mf)
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "End a machine's or device's credential now (its open connections are closed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url, cred, err := mf.resolve(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var ans struct {
				Revoked string `json:"revoked"`
				ID      string `json:"id"`
				Role    string `json:"role"`
				Closed  int    `json:"closed"`
			}
			if err := relayCall(cmd.Context(), "POST", url+"/api/devices/revoke", cred, map[string]string{"name": args[0]}, &ans); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked %s %q (%d connections closed).\n", ans.Role, ans.Revoked, ans.Closed)
			if ans.Role != "device" || ans.ID == "" {
				return nil
			}
			// This machine trusts it no more either: the sessions it
			// runs get new keys without it (docs/security.md, "Key
			// rotation"), whatever the relay says.
			state, err := stateDir(mf.state)
			if err != nil {
				return err
			}
			untrusted, err := apiclient.UntrustDevice(state, ans.ID)
			if err != nil {
				return err
			}
			if untrusted {
				fmt.Fprintln(cmd.OutOrStdout(), "This machine no longer trusts it: its sessions get new keys, for the devices that remain.")
			}
			return nil
		},
	}
	rename := &cobra.Command{
		Use:   "rename NAME NEW-NAME",
		Short: "Rename a machine or device",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			url, cred, err := mf.resolve(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var ans struct {
				Name string `json:"name"`
			}
			if err := relayCall(cmd.Context(), "POST", url+"/api/devices/rename", cred, map[string]string{"name": args[0], "to": args[1]}, &ans); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Renamed %q to %q.\n", args[0], ans.Name)
			return nil
		},
	}
	addMachineFlags(revoke, &mf)
	addMachineFlags(rename, &mf)
	cmd.AddCommand(revoke, rename)
	return cmd
}
