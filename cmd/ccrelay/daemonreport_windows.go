//go:build windows

package main

import "os"

// closeOnExec: a daemon on Windows passes no report pipe (daemon.reportPipes).
func closeOnExec(*os.File) {}
