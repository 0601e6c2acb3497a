// Command ccrelay puts a running Claude Code session in your pocket.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
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
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	stop()
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
		Use:   "ccrelay [flags] [-- claude arguments]",
		Short: "Relay Claude Code sessions to your phone",
		Long:  "ccrelay turns what Claude Code does into a small, stable event stream (the session protocol)\nand relays it to an app on your phone or browser.",
		Example: `  ccrelay                      # run Claude Code here, relayed
  ccrelay -- --model opus      # arguments after -- go to claude
  ccrelay -- --resume <id>     # resume a session`,
		Version:       versionText(),
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 0 {
				return fmt.Errorf("unknown command %q (arguments for claude go after --)", args[0])
			} else if dash < 0 && len(args) > 0 {
				return fmt.Errorf("unknown command %q (arguments for claude go after --)", args[0])
			}
			return runLocal(cmd, &lf, args)
		},
	}
	addLocalFlags(root, &lf)
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newReplayCmd(), newHookCmd(), newServeCmd(), newDemoCmd(), newVersionCmd(), newPairCmd(), newLoginCmd(), newDevicesCmd())
	return root
}
