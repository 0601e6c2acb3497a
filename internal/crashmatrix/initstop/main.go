//go:build linux

// Command initstop runs Claude Code with its stdout passed through, and
// stops Claude (SIGSTOP) the moment it prints its first system/init line,
// before passing that line on: a test then holds a Claude that has printed
// init and not written its transcript yet (Claude writes it about 100 ms
// later), and kills it there.
//
//	initstop <stopfile> <claude> [args...]
//
// Once Claude is stopped, its pid is written to stopfile. Claude dies with
// initstop (Pdeathsig), and initstop exits as Claude did.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: initstop <stopfile> <claude> [args...]")
		os.Exit(2)
	}
	stopfile := os.Args[1]
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "initstop:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "initstop:", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	r := bufio.NewReaderSize(out, 1<<20)
	w := bufio.NewWriter(os.Stdout)
	stopped := false
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if _, err := os.Stat(stopfile); err == nil {
				stopped = true // a Claude started again after the one stopped
			}
			if !stopped && bytes.Contains(line, []byte(`"subtype":"init"`)) {
				stopped = true
				syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP)
				os.WriteFile(stopfile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
			}
			w.Write(line)
			if r.Buffered() == 0 {
				w.Flush()
			}
		}
		if err != nil {
			break
		}
	}
	w.Flush()
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset()
		syscall.Kill(os.Getpid(), ws.Signal())
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
