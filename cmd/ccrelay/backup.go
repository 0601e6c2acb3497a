package main

import (
	"fmt"
	"path/filepath"

	"github.com/ccrelay/ccrelay/relay"
	"github.com/spf13/cobra"
)

func newBackupCmd() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "backup [--data DIR] FILE",
		Short: "Copy the relay's database to FILE, consistently, while the relay runs; then check the copy",
		Long: `Backup writes a consistent copy of the relay's database (SQLite VACUUM INTO,
through a read-only connection: the relay keeps serving and writing), checks it
(integrity_check) and prints what it holds. FILE must not exist; it is made
mode 0600. To restore, put the copy in a data folder as relay.db (with the
token file) and run serve --data on that folder.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := dataDir(data)
			if err != nil {
				return err
			}
			rep, err := relay.Backup(cmd.Context(), filepath.Join(dir, relay.StoreFile), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup %s: integrity %s, %d sessions, %d envelopes, %d commands, %d deleted, %d bytes\n",
				args[0], rep.Integrity, rep.Sessions, rep.Envelopes, rep.Commands, rep.Tombstones, rep.Bytes)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the relay's data folder (default $XDG_DATA_HOME/ccrelay)")
	return cmd
}
