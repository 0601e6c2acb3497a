// Command ccrelay puts a running Claude Code session in your pocket.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	trimStderrLog()
	root := newRootCmd()
	heapAtExit := startHeapProfiles(ctx)
	err := root.ExecuteContext(ctx)
	stop()
	heapAtExit()
	if err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if ee == nil || ee.err != nil {
			fmt.Fprintln(os.Stderr, "ccrelay:", err)
		}
		os.Exit(code)
	}
}

func newRootCmd() *cobra.Command {
	var lf localFlags
	root := &cobra.Command{
		Use:   "ccrelay [flags] [claude flags and arguments]",
		Short: "Relay Claude Code sessions to your phone",
		Long: "ccrelay turns what Claude Code does into a small, stable event stream (the session protocol)\nand relays it to an app on your phone or browser.\n\n" +
			"ccrelay runs Claude Code in this terminal. Every flag and argument that ccrelay does not define\n" +
			"(below) goes to Claude unchanged, in its order; so does everything after --.\n" +
			"Claude's own help: ccrelay -- --help.",
		Example: `  ccrelay                      # run Claude Code here, relayed
  ccrelay --model opus         # Claude's flags go to Claude
  ccrelay --resume <id>        # resume a session
  ccrelay -c                   # continue the last session
  ccrelay -p "explain this"    # print mode
  ccrelay -- --help            # everything after -- goes to Claude`,
		Version:       versionText(),
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		// ccrelay's own flags are picked out of the command line by
		// splitArgs: cobra would refuse Claude's as unknown, and cannot
		// tell which of them take a value.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			own, claudeArgs := splitArgs(cmd.Flags(), args)
			if err := cmd.Flags().Parse(own); err != nil {
				return err
			}
			if help, _ := cmd.Flags().GetBool("help"); help {
				return cmd.Help()
			}
			if version, _ := cmd.Flags().GetBool("version"); version {
				fmt.Fprint(cmd.OutOrStdout(), cmd.Version)
				return nil
			}
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				// A mistyped command is not a prompt for Claude.
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					return fmt.Errorf("unknown command %q; did you mean %q? (a prompt for claude goes after --)", args[0], s[0])
				}
			}
			return runLocal(cmd, &lf, claudeArgs)
		},
	}
	addLocalFlags(root, &lf)
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newReplayCmd(), newHookCmd(), newStatusLineCmd(), newServeCmd(), newDemoCmd(), newVersionCmd(), newPairCmd(), newLoginCmd(), newDevicesCmd(), newSessionsCmd(), newBackupCmd(), newDaemonCmd(), newAttachCmd(), newStatusCmd(), newFollowCmd(), newSetupCmd(), newCodexCmd())
	return root
}

// splitArgs separates ccrelay's own flags (those fs defines, with their
// values, --flag value or --flag=value) from everything else, which goes to
// Claude in its order. Everything after "--" goes to Claude.
func splitArgs(fs *pflag.FlagSet, args []string) (own, claudeArgs []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			claudeArgs = append(claudeArgs, args[i+1:]...)
			break
		}
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			f = fs.Lookup(name)
		case len(a) == 2 && a[0] == '-':
			f = fs.ShorthandLookup(a[1:])
		}
		if f == nil {
			claudeArgs = append(claudeArgs, a)
			continue
		}
		own = append(own, a)
		if !strings.Contains(a, "=") && f.NoOptDefVal == "" && i+1 < len(args) {
			i++
			own = append(own, args[i])
		}
	}
	return own, claudeArgs
}
