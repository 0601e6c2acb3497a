package launcher

import (
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ccrelay/ccrelay/claude"
)

// process is one running Claude.
type process struct {
	cmd    *exec.Cmd
	tree   *claudeTree
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailBuffer
	wmu    sync.Mutex
	// Prompts written and prompts taken (emu): a prompt is taken once its
	// echo came, or, when Claude ended first, once its transcript holds it
	// (takenAtExit); echo is closed and replaced at each. untaken are the
	// texts of the prompts written and not taken, oldest first; lastEcho
	// is the uuid of the last prompt echoed.
	emu     sync.Mutex
	written int
	echoed  int
	echo    chan struct{}
	untaken []string
	// sinceResult counts the prompts taken since Claude's last result.
	sinceResult int
	lastEcho    string
	// transcriptAt is the size of the session's transcript when this
	// Claude started (-1: not known): what it writes comes after.
	transcriptAt int64
	// startAt is where this Claude's part of the transcript starts (-1:
	// not known); stopOut is what it printed while being stopped
	// (remote_stopout.go).
	startAt  int64
	stopOut  stopOutput
	exited   chan struct{} // stdout ended and the process was waited for
	done     chan struct{} // exited and handled
	stopping atomic.Bool
	waitErr  error
	// again are the prompts this Claude ended without taking, given to
	// the next one (retake).
	again retakes
}

func startProcess(bin string, args []string, dir string, env []string) (*process, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrClaudeNotFound, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = claudeEnv(env) // no secret of ccrelay's reaches Claude's tools
	cmd.SysProcAttr = childAttr()
	// A command Claude ran in a session of its own can hold Claude's
	// stderr after Claude is gone: Wait does not wait for it past this.
	cmd.WaitDelay = outputHoldTimeout
	p := &process{cmd: cmd, stderr: &tailBuffer{max: 4096}, echo: make(chan struct{}), transcriptAt: -1, startAt: -1,
		exited: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if p.tree, err = startTree(cmd); err != nil {
		return nil, fmt.Errorf("start claude: %w", err)
	}
	return p, nil
}

// writePrompt writes the prompt text and returns its number (1 for the
// first prompt of this process).
func (p *process) writePrompt(text string) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.stdin.Write(claude.PromptLine(text)); err != nil {
		return 0, err
	}
	p.emu.Lock()
	defer p.emu.Unlock()
	p.written++
	p.untaken = append(p.untaken, text)
	return p.written, nil
}

// promptsEchoed counts n prompts taken; uuid is the echo's ("": taken
// without an echo).
func (p *process) promptsEchoed(n int, uuid string) {
	p.emu.Lock()
	defer p.emu.Unlock()
	p.echoed += n
	p.sinceResult += n
	p.untaken = p.untaken[min(n, len(p.untaken)):]
	if uuid != "" {
		p.lastEcho = uuid
	}
	if p.echo != nil {
		close(p.echo)
	}
	p.echo = make(chan struct{})
}

// atResult is told each result of Claude's; local says it ran no model
// turn (num_turns 0). A slash command Claude runs itself without a word
// on stdout (2.1.330: /context, /cost, /model…; it prints their output
// as a message of its own and such a result) is taken with it: the oldest
// prompt not taken, when it is one and nothing was taken since the last
// result. It reports whether it took one.
func (p *process) atResult(local bool) bool {
	p.emu.Lock()
	defer p.emu.Unlock()
	taken := local && p.sinceResult == 0 && len(p.untaken) > 0 && isSlashCommand(p.untaken[0])
	p.sinceResult = 0
	if !taken {
		return false
	}
	p.echoed++
	p.untaken = p.untaken[1:]
	if p.echo != nil {
		close(p.echo)
	}
	p.echo = make(chan struct{})
	return true
}

// newTranscript says that the prompts taken from now on are in a new
// transcript (Claude moved to a new session): no echo of it is known yet.
func (p *process) newTranscript() {
	p.emu.Lock()
	defer p.emu.Unlock()
	p.lastEcho = ""
}

// notEchoed returns the texts of the prompts written and not taken, and
// the uuid of the last prompt echoed.
func (p *process) notEchoed() (texts []string, lastEcho string) {
	p.emu.Lock()
	defer p.emu.Unlock()
	return slices.Clone(p.untaken), p.lastEcho
}

// echoedPrompts is how many of the prompts written to Claude an echo
// takes. Each prompt is written as one text block (claude.PromptLine);
// Claude takes the prompts queued behind a running turn together, as one
// user message with a text block per prompt (Claude Code 2.1.330: "second\n",
// "third").
// A message with a tool result is no echo (0), whatever its keys say.
func echoedPrompts(rec *claude.Record) int {
	if rec.Message == nil {
		return 1
	}
	n := 0
	for _, b := range rec.Message.Content.Blocks {
		switch b.Type {
		case "text":
			n++
		case "tool_result":
			return 0
		}
	}
	return max(n, 1)
}

// echoedUpTo reports whether prompt n was echoed, and else a channel closed
// at the next echo.
func (p *process) echoedUpTo(n int) (bool, <-chan struct{}) {
	p.emu.Lock()
	defer p.emu.Unlock()
	if p.echo == nil {
		p.echo = make(chan struct{})
	}
	return p.echoed >= n, p.echo
}

func (p *process) write(line []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.stdin.Write(line)
	return err
}

// wait reaps the process after its stdout ended; taken (if not nil) runs
// before the process is seen to have exited: what Claude took without
// echoing it is counted then.
func (p *process) wait(taken func()) {
	p.waitErr = p.cmd.Wait()
	p.tree.release()
	if taken != nil {
		taken()
	}
	close(p.exited)
}

// ended reports whether the process ended, waiting for it a little (its
// stdin refused a write: it is ending, its output read for at most
// outputHoldTimeout more).
func (p *process) ended() bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// reason says how the process ended, with the end of its stderr.
func (p *process) reason() string {
	select {
	case <-p.exited:
	default:
		return "still running"
	}
	msg := "exit status 0"
	if p.waitErr != nil {
		msg = p.waitErr.Error()
	}
	if tail := strings.TrimSpace(p.stderr.String()); tail != "" {
		if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		msg += ": " + tail
	}
	return msg
}

// stop closes stdin (Claude exits when its input ends), then SIGTERM, then
// SIGKILL.
func (p *process) stop(timeout time.Duration) {
	p.stopping.Store(true)
	p.wmu.Lock()
	_ = p.stdin.Close()
	p.wmu.Unlock()
	select {
	case <-p.exited:
		return
	case <-time.After(timeout):
	}
	_ = p.tree.terminate()
	select {
	case <-p.exited:
		return
	case <-time.After(timeout):
	}
	_ = p.tree.kill()
	select {
	case <-p.exited:
		return
	case <-time.After(outputHoldTimeout):
	}
	// Claude is dead, and something it started holds its stdout: what
	// comes from there is not Claude's; stop reading.
	_ = p.stdout.Close()
	<-p.exited
}

// outputHoldTimeout is how long Claude's output is read, and its stderr
// waited for, once Claude is killed (or has exited, for stderr): a process
// Claude left can hold them for as long as it runs.
const outputHoldTimeout = time.Second

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
