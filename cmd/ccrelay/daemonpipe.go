package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// daemonStart is the first line `ccrelay daemon` writes to the stdin of a
// session it starts (--daemon-pipe): the first prompt, if any, and the
// machine's name (the daemon's --name), which the session announces as its
// machine. The prompt never goes on the command line, where ps shows it.
type daemonStart struct {
	Prompt  string `json:"prompt,omitempty"`
	Machine string `json:"machine,omitempty"`
}

// daemonStoppedNote is what a session started by a daemon says when the
// daemon stopped, or was killed, under it.
const daemonStoppedNote = "The ccrelay daemon that ran this session stopped, so Claude Code was stopped with it. Resume the session from New session → Resume."

// daemonStopTimeout is how long the Claude of a session started by a
// daemon gets to exit once its stdin is closed, and again after SIGTERM,
// before SIGKILL: the session ends promptly when the daemon dies or the app
// stops it, whatever Claude was doing (a tool may run for minutes).
const daemonStopTimeout = time.Second

// orphansTimeout bounds the ending of what Claude's commands left running
// once a daemon's session stopped its Claude (internal/orphans).
const orphansTimeout = 2 * time.Second

// errDaemonGone ends the loop of a session whose daemon is gone.
var errDaemonGone = errors.New("the daemon stopped")

// readDaemonStart reads the daemon's first line from r.
func readDaemonStart(r *bufio.Reader) (daemonStart, error) {
	var ds daemonStart
	line, err := readLineMax(r, protocol.MaxCommandBytes+1024)
	if err != nil {
		return ds, fmt.Errorf("read what the daemon asks: %w", err)
	}
	if err := json.Unmarshal(line, &ds); err != nil {
		return ds, fmt.Errorf("read what the daemon asks: %w", err)
	}
	return ds, nil
}

// readLineMax reads one line of at most max bytes.
func readLineMax(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, fmt.Errorf("a line longer than %d bytes", max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return line, nil
	}
}

// daemonMsg is a later line of the daemon's pipe.
type daemonMsg struct {
	// Stop: the app asked to stop this session.
	Stop bool `json:"stop,omitempty"`
}

// errStopAsked ends the loop of a session the app asked its daemon to stop.
var errStopAsked = errors.New("stopped from the app")

// daemonCutResult is the result of a call Claude was running when the
// session was stopped for the daemon (stop asked, or the daemon gone).
const daemonCutResult = "Claude Code was stopped with the session while this tool ran; the tool did not finish."

// daemonNote is the note and the status of the turn Claude was in the
// middle of when the daemon ended the session for why: the daemon gone
// (failed), or stop asked from the app (cancelled).
func daemonNote(why error) (string, protocol.TurnStatus) {
	if errors.Is(why, errDaemonGone) {
		return daemonStoppedNote, protocol.StatusFailed
	}
	return stoppedNote, protocol.StatusCancelled
}

// stoppedNote is what a session stopped from the app says.
const stoppedNote = "Stopped from the app. Resume it from New session → Resume."

// watchDaemon returns a context that ends when the daemon's pipe (r) says
// stop (cause errStopAsked) or ends (cause errDaemonGone: the daemon
// stopped or was killed, and the kernel closed its end). why says which,
// nil while neither happened; stop closes c (which r reads) and waits for
// the watcher. beforeEnd (if set) runs once, before ctx ends.
func watchDaemon(parent context.Context, r *bufio.Reader, c io.Closer, beforeEnd func()) (ctx context.Context, why func() error, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	var cause atomic.Pointer[error]
	var stopping atomic.Bool
	end := func(err error) {
		if !stopping.Load() && cause.CompareAndSwap(nil, &err) {
			if beforeEnd != nil {
				beforeEnd()
			}
			cancel(err)
		}
	}
	go func() {
		for {
			line, err := readLineMax(r, 4096)
			if err != nil {
				end(errDaemonGone)
				return
			}
			var m daemonMsg
			if json.Unmarshal(line, &m) == nil && m.Stop {
				end(errStopAsked)
			}
		}
	}()
	return ctx, func() error {
			if p := cause.Load(); p != nil {
				return *p
			}
			return nil
		}, func() {
			stopping.Store(true)
			_ = c.Close()
			cancel(context.Canceled)
		}
}

// first hands the daemon's first prompt to the loop as a command from the
// app, once the session is known.
func (a *appLink) first(ctx context.Context, text string) {
	select {
	case <-a.known:
	case <-ctx.Done():
		return
	}
	cmd := launcher.Command{Command: protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: text},
		Reply: func(err error) {
			if err != nil {
				a.log.Warn("the first prompt was not taken", "err", err)
			}
		}}
	select {
	case a.cmds <- cmd:
	case <-ctx.Done():
	}
}

// openDaemonReport opens the daemon's report pipe (--daemon-report-fd),
// nil without one. It is closed on exec: Codex's app-server, started
// after it, does not hold it open.
func openDaemonReport(f *codexFlags) (*os.File, error) {
	if f.reportFD == 0 {
		return nil, nil
	}
	if !f.daemonPipe || f.reportFD < 3 {
		return nil, fmt.Errorf("--daemon-report-fd %d: a descriptor past the standard three, with --daemon-pipe", f.reportFD)
	}
	w := os.NewFile(uintptr(f.reportFD), "daemon-report")
	if w == nil {
		return nil, fmt.Errorf("--daemon-report-fd %d is no open descriptor", f.reportFD)
	}
	closeOnExec(w)
	return w, nil
}

// reportThread tells the daemon the id of the session's thread (one JSON
// line), then closes the pipe: the session reports once.
func reportThread(w *os.File, thread string) error {
	b, _ := json.Marshal(struct {
		Thread string `json:"thread"`
	}{thread})
	_, err := w.Write(append(b, '\n'))
	return errors.Join(err, w.Close())
}
