// Command fakeclaude stands in for Claude Code in tests: it fires the
// SessionStart hook from --settings like the real one, then writes a scripted
// transcript where Claude would, and exits with a scripted code. Run as
// `fakeclaude hook FILE` it is a SessionStart hook forwarder.
//
// The script is a JSON file named by $FAKE_CLAUDE_SCRIPT:
//
//	{"lines": ["{...record...}", ...], "intervalMs": 5, "exit": 0, "hang": false}
//
// "{{session}}" in a line is replaced by the session id, "{{source}}" by
// startup or resume. With hang, it waits
// for a signal after writing (SIGTERM and SIGINT end it with 128+signal).
// $FAKE_CLAUDE_HUP_CLEANUP_MS: see exitOn. $FAKE_CLAUDE_SCREEN marks where
// its screen begins and ends on stderr. $FAKE_CLAUDE_EXITSTAMP names a file
// that gets the time of its exit (Unix nanoseconds); $FAKE_CLAUDE_SETTINGSDUMP
// one that gets the content of the --settings file it runs with.
// $FAKE_CLAUDE_RAW puts the terminal on stdin in raw mode first.
// $FAKE_CLAUDE_OUTPUT_HOLDER=N starts a process of its own session that
// holds its stdout and stderr for N seconds (a command Claude left).
// $FAKE_CLAUDE_STATUSLINE names a file that gets the output of the
// settings' status line command, run (after the lines) until it holds
// $FAKE_CLAUDE_STATUSLINE_UNTIL.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/launcher"
)

type script struct {
	Lines      []string `json:"lines"`
	IntervalMS int      `json:"intervalMs"`
	Exit       int      `json:"exit"`
	Hang       bool     `json:"hang"`
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		// As Claude Code prints it; FAKE_CLAUDE_VERSION plays another.
		v := os.Getenv("FAKE_CLAUDE_VERSION")
		if v == "" {
			v = claude.TestedVersion
		}
		fmt.Println(v + " (Claude Code)")
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "hook" {
		file := ""
		if len(os.Args) > 2 {
			file = os.Args[2]
		}
		if err := launcher.ForwardHook(context.Background(), os.Stdin, file); err != nil {
			fmt.Fprintln(os.Stderr, "fakeclaude hook:", err)
		}
		return
	}
	sigs := watchSignals()
	if err := run(sigs); err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		os.Exit(70)
	}
}

func run(sigs chan os.Signal) error {
	if os.Getenv("FAKE_CLAUDE_RAW") != "" {
		// Like Claude's interface: the terminal in raw mode (no echo),
		// put back only on a clean exit.
		if _, err := term.MakeRaw(int(os.Stdin.Fd())); err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
	}
	if p := os.Getenv("FAKE_CLAUDE_PIDFILE"); p != "" {
		os.WriteFile(p, []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
	if p := os.Getenv("FAKE_CLAUDE_PIDLOG"); p != "" {
		f, _ := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	if secs := os.Getenv("FAKE_CLAUDE_OUTPUT_HOLDER"); secs != "" {
		holdOutput(secs)
	}
	var settings, session, source = "", "", "startup"
	streamMode := false
	withID, resuming, forking := false, false, false
	idArg, resumeArg := "", ""
	streamModel, streamMode2 := "fake-model", "default"
	args := os.Args[1:]
	if p := os.Getenv("FAKE_CLAUDE_ARGLOG"); p != "" {
		// One JSON array of arguments per start.
		b, _ := json.Marshal(args)
		f, _ := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		fmt.Fprintln(f, string(b))
		f.Close()
	}
	if p := os.Getenv("FAKE_CLAUDE_ENVDUMP"); p != "" {
		// The environment Claude (and every tool it runs) sees.
		os.WriteFile(p, []byte(strings.Join(os.Environ(), "\n")+"\n"), 0o644)
	}
	for i := 0; i < len(args); i++ {
		// Both --flag value and --flag=value, as Claude Code takes them.
		name, value, joined := strings.Cut(args[i], "=")
		if !joined && strings.HasPrefix(name, "-") && i+1 < len(args) {
			value = args[i+1]
		}
		next := func() string {
			if !joined {
				i++
			}
			return value
		}
		switch name {
		case "--model":
			streamModel = next()
		case "--permission-mode":
			streamMode2 = next()
		case "--input-format":
			streamMode = next() == "stream-json"
		case "--settings":
			settings = next()
		case "--session-id":
			withID, idArg = true, next()
		case "--resume", "-r":
			source, resumeArg = "resume", next()
			resuming = true
		case "--fork-session":
			forking = true
		}
	}
	// A fork is a session of its own: the --session-id given, else a new
	// one; a resume continues its session; --session-id names a new one.
	switch {
	case forking && resuming && !withID:
		session = claude.NewSessionID()
	case withID:
		session = idArg
	default:
		session = resumeArg
	}
	if withID && resuming && !forking {
		// As Claude Code refuses it.
		fmt.Fprintln(os.Stderr, "Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.")
		os.Exit(1)
	}
	if session == "" {
		session = claude.NewSessionID()
	}
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	dir, err := claude.ProjectDir(claude.ConfigDir(os.Getenv, home), cwd)
	if err != nil {
		return err
	}
	transcript := claude.TranscriptPath(dir, session)
	var sc script
	if p := os.Getenv("FAKE_CLAUDE_SCRIPT"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &sc); err != nil {
			return fmt.Errorf("script: %w", err)
		}
	}
	if p := os.Getenv("FAKE_CLAUDE_SETTINGSDUMP"); p != "" && settings != "" {
		// The settings Claude runs with (the last --settings).
		b, _ := os.ReadFile(settings)
		os.WriteFile(p, b, 0o644)
	}
	if settings != "" {
		if err := runHooks(settings, session, transcript, cwd, source); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if streamMode {
		// As Claude Code: a session is resumed only from a transcript
		// that holds a message, and a new one only under an id no
		// transcript has.
		if msg := refuseSession(transcript, session, resuming && !forking, withID); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
			os.Exit(1)
		}
		go func() {
			sig := <-sigs
			terminating(sig)
			exitOn(sig, sigs)
		}()
		// The transcript is made when the first record is written.
		return runStream(session, &lazyFile{path: transcript}, os.Getenv("FAKE_CLAUDE_STREAM"), streamModel, streamMode2, resuming && !forking)
	}
	// As Claude Code, the transcript is made with its first record.
	f := &lazyFile{path: transcript}
	defer f.Close()
	screen := os.Getenv("FAKE_CLAUDE_SCREEN") != ""
	if screen {
		// Where Claude's screen begins and ends on the terminal.
		fmt.Fprintln(os.Stderr, screenOn)
	}
	for _, l := range sc.Lines {
		select {
		case s := <-sigs:
			exitOn(s, sigs)
		case <-time.After(time.Duration(sc.IntervalMS) * time.Millisecond):
		}
		if _, err := f.Write([]byte(strings.NewReplacer("{{session}}", session, "{{source}}", source).Replace(l) + "\n")); err != nil {
			return err
		}
	}
	if p := os.Getenv("FAKE_CLAUDE_STATUSLINE"); p != "" && settings != "" {
		statusLine(settings, session, p, os.Getenv("FAKE_CLAUDE_STATUSLINE_UNTIL"))
	}
	if sc.Hang {
		exitOn(<-sigs, sigs)
	}
	if screen {
		fmt.Fprintln(os.Stderr, screenOff)
	}
	if p := os.Getenv("FAKE_CLAUDE_EXITSTAMP"); p != "" {
		// When Claude exits, for the time ccrelay takes after it.
		os.WriteFile(p, []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o644)
	}
	os.Exit(sc.Exit)
	return nil
}

// refuseSession is Claude Code's refusal to start session from
// transcript, "" when it starts: --resume needs a transcript that holds a
// message ("No conversation found"), --session-id an id no transcript has,
// even one without a message ("already in use").
func refuseSession(transcript, session string, resuming, withID bool) string {
	b, err := os.ReadFile(transcript)
	exists := err == nil
	switch {
	case resuming && !holdsMessage(b):
		return "No conversation found with session ID: " + session
	case withID && exists:
		return "Error: Session ID " + session + " is already in use."
	}
	return ""
}

// holdsMessage reports whether a transcript holds a user or assistant
// record.
func holdsMessage(b []byte) bool {
	for _, l := range strings.Split(string(b), "\n") {
		var r struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(l), &r) == nil && (r.Type == "user" || r.Type == "assistant") {
			return true
		}
	}
	return false
}

// lazyFile is a transcript made when its first record is written, as
// Claude Code makes it (not at start).
type lazyFile struct {
	path string
	f    *os.File
}

func (l *lazyFile) Write(b []byte) (int, error) {
	if l.f == nil {
		f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return 0, err
		}
		l.f = f
	}
	return l.f.Write(b)
}

func (l *lazyFile) Name() string { return l.path }

func (l *lazyFile) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}

// What $FAKE_CLAUDE_SCREEN prints on stderr when the interactive Claude's
// screen starts and before it exits: nothing of ccrelay's may come between.
const (
	screenOn  = "[fake claude screen on]"
	screenOff = "[fake claude screen off]"
)

// exitOn ends the process for signal s as Claude does: 128+signal. With
// $FAKE_CLAUDE_HUP_CLEANUP_MS, a hangup is first cleaned up for that long
// (as Claude's Node runtime does), and a signal arriving meanwhile ends it
// with that signal's code instead.
func exitOn(s os.Signal, sigs chan os.Signal) {
	if ms, _ := strconv.Atoi(os.Getenv("FAKE_CLAUDE_HUP_CLEANUP_MS")); ms > 0 && s == syscall.SIGHUP {
		select {
		case s = <-sigs:
		case <-time.After(time.Duration(ms) * time.Millisecond):
		}
	}
	if os.Getenv("FAKE_CLAUDE_SCREEN") != "" {
		fmt.Fprintln(os.Stderr, screenOff)
	}
	os.Exit(128 + int(s.(syscall.Signal)))
}

// statusLine runs the settings' status line command as Claude Code does
// (through the shell, the session's details on stdin) until its output
// holds until (at most 20 s), and writes the last output to path.
func statusLine(settings, session, path, until string) {
	b, _ := os.ReadFile(settings)
	var s struct {
		StatusLine struct {
			Command string `json:"command"`
		} `json:"statusLine"`
	}
	json.Unmarshal(b, &s)
	in, _ := json.Marshal(map[string]any{"session_id": session, "model": map[string]string{"display_name": "Fake"}})
	var out []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		cmd := exec.Command("/bin/sh", "-c", s.StatusLine.Command)
		cmd.Stdin = strings.NewReader(string(in))
		out, _ = cmd.Output()
		if strings.Contains(string(out), until) {
			break
		}
	}
	os.WriteFile(path, out, 0o644)
}

func runHooks(settings, session, transcript, cwd, source string) error {
	b, err := os.ReadFile(settings)
	if err != nil {
		return err
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	in, _ := json.Marshal(map[string]string{"session_id": session, "transcript_path": transcript, "cwd": cwd,
		"hook_event_name": "SessionStart", "source": source})
	for _, m := range s.Hooks["SessionStart"] {
		for _, h := range m.Hooks {
			// As Claude Code runs a hook: exec form (args) directly,
			// otherwise through the shell.
			cmd := exec.Command("/bin/sh", "-c", h.Command)
			if h.Args != nil {
				cmd = exec.Command(h.Command, h.Args...)
			}
			cmd.Stdin = strings.NewReader(string(in))
			cmd.Stderr = os.Stderr
			_ = cmd.Run() // a failing hook does not stop Claude
		}
	}
	return nil
}
