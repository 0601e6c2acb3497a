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

// Set by release builds with -ldflags "-X main.version=v1.2.3 -X
// main.commit=<hash> -X main.buildDate=<RFC 3339>" (scripts/release); empty,
// what the build recorded is used (debug.ReadBuildInfo: `go install
// …@v1.2.3` records the module version, a checkout its commit).
var version, commit, buildDate string

// stamp is what a release build sets with -ldflags.
type stamp struct{ version, commit, date string }

// versionText is what `ccrelay version` and `ccrelay --version` print.
func versionText() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(bi, runtime.GOOS+"/"+runtime.GOARCH, stamp{version, commit, buildDate})
}

// formatVersion says which ccrelay this is: the module version (a tag or a
// pseudo-version when built from a checkout, "(devel)" when the build did not
// record one), the commit it was built from when the build recorded it, the
// Claude Code version it is tested with, the build date (a release's own,
// else the commit's time: a build from the same commit gives the same
// bytes) and the Go toolchain. What a release stamped wins.
func formatVersion(bi *debug.BuildInfo, platform string, ld stamp) string {
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
	if ld.version != "" {
		version = ld.version
	}
	if ld.commit != "" {
		rev, modified = ld.commit, false
	}
	date := when
	if ld.date != "" {
		date = ld.date
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
	if date != "" {
		fmt.Fprintf(&b, "build date %s\n", date)
	}
	fmt.Fprintf(&b, "tested with Claude Code %s\n", claude.TestedVersion)
	fmt.Fprintf(&b, "built with %s for %s\n", goVersion, platform)
	return b.String()
}
