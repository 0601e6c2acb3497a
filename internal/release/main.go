package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
)

func main() {
	var o Options
	var targets string
	flag.StringVar(&o.Version, "version", "", "the version to stamp, e.g. v1.2.3 (required)")
	flag.StringVar(&o.Out, "out", "dist", "where the archives and SHA256SUMS go")
	flag.StringVar(&o.Root, "root", ".", "the module's folder (a git checkout)")
	flag.StringVar(&targets, "targets", strings.Join(Targets, ","), "comma-separated os/arch targets")
	flag.Parse()
	if o.Version == "" {
		fmt.Fprintln(os.Stderr, "release: -version is required")
		os.Exit(2)
	}
	o.Targets = strings.Split(targets, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := FromGit(ctx, &o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	arts, err := Build(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, a := range arts {
		fmt.Printf("%s  %s  (binary %d bytes)\n", a.SHA256, a.Name, a.Binary)
	}
}
