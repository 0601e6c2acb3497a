package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ccrelay/ccrelay/claude"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ccrelay's version and the Claude Code version it is tested with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
}

// versionText is what `ccrelay version` and `ccrelay --version` print.
func versionText() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(bi, runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion says which ccrelay this is: the module version (a tag or a
// pseudo-version when built from a checkout, "(devel)" when the build did not
// record one), the commit it was built from when the build recorded it, the
// Claude Code version it is tested with, and the Go toolchain.
func formatVersion(bi *debug.BuildInfo, platform string) string {
	version, goVersion := "(devel)", "unknown Go"
	var rev, when string
	modified := false
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ccrelay %s\n", version)
	if rev != "" {
		fmt.Fprintf(&b, "commit %s", rev)
		if when != "" {
			fmt.Fprintf(&b, " (%s)", when)
		}
		if modified {
			b.WriteString(" with local changes")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "tested with Claude Code %s\n", claude.TestedVersion)
	fmt.Fprintf(&b, "built with %s for %s\n", goVersion, platform)
	return b.String()
}
