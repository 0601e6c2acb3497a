//go:build linux

package crashmatrix

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

const (
	typedPrompt = "typed in the terminal"
	typedAnswer = "answer in the terminal"
)

// terminal is a pseudo-terminal ccrelay runs in; it keeps what was drawn.
type terminal struct {
	ptmx *os.File
	mu   sync.Mutex
	buf  strings.Builder
}

func (s *terminal) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *terminal) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return testutil.TerminalText(s.buf.String())
}

// startLocal runs ccrelay in local mode (Claude in the terminal) for the
// session, with the crash point, if any.
func (r *rig) startLocal(point string) *terminal {
	r.t.Helper()
	cmd := exec.Command(binary, "--claude", r.claudeBin, "--state", r.state, "--relay", r.base, "--relay-token", r.token, "--", "--session-id", r.session)
	cmd.Dir, cmd.Env = r.env.Project, r.env.Environ()
	if point != "" {
		cmd.Env = append(cmd.Env, crashpoint.Env+"="+point)
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		r.t.Fatal(err)
	}
	term := &terminal{ptmx: ptmx}
	copied := make(chan struct{})
	go func() { io.Copy(term, ptmx); close(copied) }()
	r.proc, r.exited = cmd, make(chan struct{})
	exited := r.exited
	go func() { cmd.Wait(); close(exited) }()
	r.t.Cleanup(func() {
		// The copy ends once nothing holds the terminal: ccrelay and
		// Claude stopped.
		r.stop()
		ptmx.Close()
		select {
		case <-copied:
		case <-time.After(30 * time.Second):
			r.t.Errorf("something still holds the terminal 30 s after ccrelay stopped")
		}
	})
	return term
}

// screen waits until the terminal shows what cond looks for.
func (r *rig) screen(term *terminal, what string, cond func(string) bool) {
	r.t.Helper()
	r.phone.until(what, func() bool { return cond(term.text()) })
}

// typeLine types text into the terminal and presses Enter, once Claude
// echoed it (the terminal draws spaces as cursor moves: compared without).
func (r *rig) typeLine(term *terminal, text string) {
	r.t.Helper()
	squeezed := strings.ReplaceAll(text, " ", "")
	mark := len(term.text())
	echoed := func() bool { return strings.Contains(strings.ReplaceAll(term.text()[mark:], " ", ""), squeezed) }
	for attempt := 0; !echoed(); attempt++ {
		if attempt == 20 {
			r.t.Fatalf("%q never echoed", text)
		}
		if attempt > 0 {
			term.ptmx.Write([]byte(strings.Repeat("\x7f", len(text))))
		}
		term.ptmx.Write([]byte(text))
		deadline := time.Now().Add(time.Second)
		for !echoed() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	term.ptmx.Write([]byte("\r"))
}

// switchCases are who TestCrashDuringSwitch kills, and where.
var switchCases = []struct{ who, point string }{
	{"ccrelay", crashpoint.SwitchFlushed},
	{"ccrelay", crashpoint.SwitchClosed},
	// The terminal's Claude killed as the phone's prompt is on its way:
	// ccrelay waits for it (launcher.DefaultKilledWait) and answers it.
	{"claude", ""},
	// The same with the prompt sent once ccrelay has reaped the killed
	// Claude: the window made certain.
	{"claude-first", ""},
}

// A session in the terminal (local mode) that the phone takes over with a
// prompt, with ccrelay killed at each step of the switch (its crash points)
// or the terminal's Claude killed as the switch begins (just after the
// prompt left the phone, or just before); ccrelay then runs again in remote
// mode (or goes on in it, when Claude was killed), and the case ends as the
// crash matrix's do.
func TestCrashDuringSwitch(t *testing.T) {
	for _, in := range claudetest.Installs(t) {
		for _, c := range switchCases {
			name := in.Version + "/" + c.who + "/switch"
			if c.point != "" {
				name += "/" + c.point
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := newRig(t, in.Path, false)
				r.setRules(append(answerFirst(r), fakeapi.Rule{LastUserContains: typedPrompt, Reply: []fakeapi.Block{fakeapi.Text(typedAnswer)}})...)
				term := r.startLocal(c.point)
				r.screen(term, "Claude's input box", func(s string) bool {
					return strings.Contains(s, "? for shortcuts") || strings.Contains(s, "❯")
				})
				r.typeLine(term, typedPrompt)
				// On a busy machine the terminal may take the Enter before
				// its input box is ready: pressed again until Claude took the
				// prompt (an empty prompt is nothing to Claude).
				for try := 0; !r.phone.within("the typed prompt taken", 15*time.Second, func() bool { return r.transcriptHas(typedPrompt) }); try++ {
					if try == 3 {
						t.Fatalf("Claude never took the typed prompt\n%s", r.output())
					}
					term.ptmx.Write([]byte("\r"))
				}
				r.phone.until("the terminal's turn on the phone", func() bool {
					return r.phone.sawText(protocol.RoleAgent, typedAnswer) && r.phone.envs[len(r.phone.envs)-1].Ev.T == protocol.KindTurnEnd
				})
				var claudePID int
				if c.who != "ccrelay" {
					r.phone.until("the terminal's Claude", func() bool { claudePID = r.localClaudePID(); return claudePID != 0 })
				}
				if c.who != "claude-first" {
					r.prompt(firstPrompt)
				}
				switch c.who {
				case "claude", "claude-first":
					syscall.Kill(claudePID, syscall.SIGKILL)
					if c.who == "claude-first" {
						// Reaped: ccrelay saw Claude die before the prompt left.
						r.phone.until("the killed Claude reaped", func() bool {
							_, err := os.Stat("/proc/" + itoa(claudePID))
							return err != nil
						})
						r.prompt(firstPrompt)
					}
					r.answeredWith(r.phone.sent[len(r.phone.sent)-1].cmd.ID, firstAnswer)
				case "ccrelay":
					select {
					case <-r.exited:
					case <-time.After(60 * time.Second):
						t.Fatalf("ccrelay was not killed at %s\n%s", c.point, r.output())
					}
					ws, _ := r.proc.ProcessState.Sys().(syscall.WaitStatus)
					if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
						t.Fatalf("ccrelay ended without reaching %s: %v\n%s", c.point, r.proc.ProcessState, r.output())
					}
					r.proc = nil
					r.startRemote()
				}
				r.nextAnswered()
				r.check()
			})
		}
	}
}

// localClaudePID is the terminal's Claude: a descendant of ccrelay that
// runs the Claude binary.
func (r *rig) localClaudePID() int {
	for _, pid := range descendants(r.proc.Process.Pid) {
		exe, _ := os.Readlink("/proc/" + itoa(pid) + "/exe")
		cmdline, _ := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
		if strings.Contains(string(cmdline), "--session-id") && !strings.HasSuffix(exe, "/ccrelay") && !strings.Contains(exe, "/sh") {
			return pid
		}
	}
	return 0
}
