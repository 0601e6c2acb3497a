//go:build linux

package crashmatrix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// Prompts and answers every case uses.
const (
	firstPrompt = "first task: wait for the test"
	firstAnswer = "first answer"
	nextPrompt  = "next question after the crash"
	nextAnswer  = "answer to the next question"
	toolDone    = "the tool is done"
)

// rig is one case: a relay, the phone following one session, the fake
// API, and ccrelay (remote mode, or the daemon) running the real Claude.
type rig struct {
	t           *testing.T
	env         *claudetest.Env
	base, token string
	phone       *phone
	session     string
	state       string // ccrelay's state folder
	gates       string // where hooks and tools mark what they reached
	claudeBin   string // what ccrelay is given as Claude

	hold     chan struct{}
	holdOnce sync.Once

	daemon  bool
	machine string
	proc    *exec.Cmd // ccrelay --remote, or the daemon
	exited  chan struct{}
	errw    *lockedWriter
}

// newRig makes a case's relay, phone and fake API, for the Claude Code
// at claudeBin.
func newRig(t *testing.T, claudeBin string, daemon bool) *rig {
	t.Helper()
	base, token := startRelay(t)
	r := &rig{t: t, base: base, token: token, session: claude.NewSessionID(), state: t.TempDir(), gates: t.TempDir(),
		hold: make(chan struct{}), daemon: daemon}
	r.env = claudetest.NewWith(t, claudeBin)
	r.claudeBin = r.env.Claude
	r.phone = dialPhone(t, base, token, r.session)
	r.phone.more = r.output
	t.Cleanup(r.stop)
	return r
}

// stop ends the case: holds released, ccrelay (or the daemon) stopped.
func (r *rig) stop() {
	r.release()
	if r.proc != nil {
		r.proc.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			r.proc.Process.Kill()
			<-r.exited
		}
		r.proc = nil
	}
}

// setRules sets the fake API's rules: the next prompt's answer, then
// rules, then the tool's follow-up.
func (r *rig) setRules(rules ...fakeapi.Rule) {
	rules = append([]fakeapi.Rule{{LastUserContains: nextPrompt, Reply: []fakeapi.Block{fakeapi.Text(nextAnswer)}}}, rules...)
	rules = append(rules, fakeapi.Rule{AfterToolResult: fakeapi.Bool(true), Reply: []fakeapi.Block{fakeapi.Text(toolDone)}})
	r.env.API.SetRules(rules...)
}

// release lets every hold go: the API's, the hooks', the tool's.
func (r *rig) release() {
	r.holdOnce.Do(func() { close(r.hold) })
	for _, g := range []string{"start.release", "tool.release"} {
		os.WriteFile(filepath.Join(r.gates, g), nil, 0o644)
	}
}

// gate is a shell command that marks name.reached and waits (at most two
// minutes) for name.release, the first time it runs only.
func (r *rig) gate(name string) string {
	g := filepath.Join(r.gates, name)
	return fmt.Sprintf(`if [ ! -e %[1]s.reached ]; then touch %[1]s.reached; n=0; while [ ! -e %[1]s.release ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done; fi; echo passed`, g)
}

// holdAtSessionStart makes Claude wait in its SessionStart hook, before it
// prints init, the first time it starts.
func (r *rig) holdAtSessionStart() {
	hook := map[string]any{"hooks": map[string]any{"SessionStart": []any{map[string]any{"hooks": []any{
		map[string]any{"type": "command", "command": r.gate("start")}}}}}}
	b, _ := json.Marshal(hook)
	os.MkdirAll(filepath.Join(r.env.Home, ".claude"), 0o755)
	if err := os.WriteFile(filepath.Join(r.env.Home, ".claude", "settings.json"), b, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// stopAtInit makes ccrelay run Claude through initstop: the first Claude
// is stopped at its init line, before it writes its transcript.
func (r *rig) stopAtInit() {
	w := filepath.Join(r.gates, "claude")
	script := fmt.Sprintf("#!/bin/sh\nexec %s %s %s \"$@\"\n", initstop, filepath.Join(r.gates, "init.stopped"), r.env.Claude)
	if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
		r.t.Fatal(err)
	}
	r.claudeBin = w
}

// reached waits for a gate's mark.
func (r *rig) reached(name string) {
	r.t.Helper()
	r.phone.until(name, func() bool {
		_, err := os.Stat(filepath.Join(r.gates, name))
		return err == nil
	})
}

// startRemote runs `ccrelay --remote` for the session.
func (r *rig) startRemote() {
	r.t.Helper()
	r.run(binary, "--claude", r.claudeBin, "--state", r.state, "--relay", r.base, "--relay-token", r.token, "--remote", "--session", r.session)
}

// startDaemon runs `ccrelay daemon`, which may start sessions in the
// project's folder.
func (r *rig) startDaemon() {
	r.t.Helper()
	tokenFile := filepath.Join(r.gates, "token")
	os.WriteFile(tokenFile, []byte(r.token), 0o600)
	r.run(binary, "daemon", "--relay", r.base, "--relay-token-file", tokenFile, "--state", r.state, "--claude", r.claudeBin,
		"--allow", filepath.Dir(r.env.Project), "--name", "matrix-box")
}

func (r *rig) run(bin string, args ...string) {
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = r.env.Project, r.env.Environ()
	r.errw = &lockedWriter{w: &bytes.Buffer{}}
	cmd.Stderr = r.errw
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.proc, r.exited = cmd, make(chan struct{})
	exited := r.exited
	go func() { cmd.Wait(); close(exited) }()
}

// startSession starts the session with its first prompt: ccrelay
// --remote and a prompt from the phone, or a start from the phone to the
// daemon's machine. It returns the command's id.
func (r *rig) startSession(text string) string {
	r.t.Helper()
	if !r.daemon {
		r.startRemote()
		return r.prompt(text)
	}
	r.startDaemon()
	r.waitMachine()
	return r.phone.command(r.machine, protocol.Command{Kind: protocol.CommandStart, Dir: r.env.Project, Target: r.session, Text: text, Mode: "default"})
}

// waitMachine waits for the daemon's machine in the list.
func (r *rig) waitMachine() {
	r.t.Helper()
	r.phone.until("the machine listed", func() bool {
		for id := range r.phone.sessions {
			if r.phone.info(id)["mode"] == "machine" {
				r.machine = id
				return true
			}
		}
		return false
	})
	r.phone.until("the machine connected", func() bool { return r.connected(r.machine) })
}

// prompt sends a prompt from the phone and returns the command's id.
func (r *rig) prompt(text string) string {
	r.phone.until("the session listed", func() bool { _, ok := r.phone.sessions[r.session]; return ok })
	return r.phone.command(r.session, protocol.Command{Kind: protocol.CommandPrompt, Text: text})
}

// permissions is the session's listed permission requests' ids.
func (r *rig) permissions() []string {
	var ids []string
	ps, _ := r.phone.info(r.session)["permissions"].([]any)
	for _, p := range ps {
		if m, ok := p.(map[string]any); ok {
			id, _ := m["id"].(string)
			ids = append(ids, id)
		}
	}
	return ids
}

// claudePID is the pid of the Claude the session runs (a descendant of
// ccrelay's process with Claude's stream-json flags), or 0.
func (r *rig) claudePID() int {
	if b, err := os.ReadFile(filepath.Join(r.gates, "init.stopped")); err == nil {
		if pid, _ := strconv.Atoi(string(b)); pid > 0 && alive(pid) {
			return pid
		}
	}
	for _, pid := range descendants(r.proc.Process.Pid) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if bytes.Contains(cmdline, []byte("--input-format\x00stream-json")) && filepath.Base(string(argv0)) != "initstop" &&
			filepath.Base(string(argv0)) != "ccrelay" {
			return pid
		}
	}
	return 0
}

// descendants lists the processes under pid (Linux /proc).
func descendants(pid int) []int {
	parent := map[int]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		p, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(filepath.Dir(d)), "/"), "/"))
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// killClaude kills the session's Claude (SIGKILL) and waits until it is
// gone.
func (r *rig) killClaude() {
	r.t.Helper()
	var pid int
	r.phone.until("Claude's process", func() bool { pid = r.claudePID(); return pid != 0 })
	syscall.Kill(pid, syscall.SIGKILL)
	r.phone.until("Claude gone", func() bool { return !alive(pid) })
}

// killProc kills ccrelay or the daemon (SIGKILL) and waits for it.
func (r *rig) killProc() {
	r.t.Helper()
	r.proc.Process.Signal(syscall.SIGKILL)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		r.t.Fatal("ccrelay did not die")
	}
	r.proc = nil
}

// lockedWriter is a writer for a child's stderr that the test may read
// meanwhile.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// output is what ccrelay (or the daemon) wrote on stderr and in its log
// files, for a failure's message.
func (r *rig) output() string {
	var sb strings.Builder
	if r.errw != nil {
		r.errw.mu.Lock()
		sb.WriteString("stderr:\n" + r.errw.w.String())
		r.errw.mu.Unlock()
	}
	logs, _ := filepath.Glob(filepath.Join(r.state, "*.log"))
	more, _ := filepath.Glob(filepath.Join(r.state, "*", "*.log"))
	for _, l := range append(logs, more...) {
		b, _ := os.ReadFile(l)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		sb.WriteString("\n" + l + ":\n" + string(b))
	}
	return sb.String()
}

// connected reports whether the relay says session's CLI is connected.
func (r *rig) connected(session string) bool {
	req, _ := http.NewRequest("GET", r.base+"/status?session="+session, nil)
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct {
		CLI bool `json:"cli"`
	}
	json.NewDecoder(resp.Body).Decode(&st)
	return st.CLI
}

func itoa(i int) string { return strconv.Itoa(i) }

// view is the rig as it is now, for checking the session it follows
// after it follows another: it shares what check reads, and runs nothing.
func (r *rig) view() *rig {
	return &rig{t: r.t, env: r.env, base: r.base, token: r.token, phone: r.phone, session: r.session, state: r.state, gates: r.gates,
		claudeBin: r.claudeBin, errw: r.errw}
}
