package launcher

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
	"github.com/ccrelay/ccrelay/internal/fakeresponses"
)

// tuiTerm stands for the terminal a Codex TUI draws on: it keeps what was
// drawn and answers the queries the TUI waits for (cursor position,
// device attributes, colours).
type tuiTerm struct {
	mu   sync.Mutex
	b    strings.Builder
	ptmx io.Writer
}

func (a *tuiTerm) Write(p []byte) (int, error) {
	s := string(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.b.Write(p)
	for q, answer := range map[string]string{"\x1b[6n": "\x1b[1;1R", "\x1b[c": "\x1b[?62;22c",
		"\x1b]10;?": "\x1b]10;rgb:ffff/ffff/ffff\x1b\\", "\x1b]11;?": "\x1b]11;rgb:0000/0000/0000\x1b\\"} {
		if strings.Contains(s, q) {
			a.ptmx.Write([]byte(answer))
		}
	}
	return len(p), nil
}

var tuiControls = regexp.MustCompile(`\x1b\[[0-9;?>]*[ -/]*[@-~]|\x1b\][^\a\x1b]*(\a|\x1b\\)`)

// drawn is what the TUI drew, without control sequences and spaces.
func (a *tuiTerm) drawn() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.ReplaceAll(tuiControls.ReplaceAllString(a.b.String(), ""), " ", "")
}

// waitTUI polls ok until it holds, failing the test after a generous
// deadline.
func waitTUI(t *testing.T, what string, ok func() bool, screen func() string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			s := screen()
			if len(s) > 2000 {
				s = s[len(s)-2000:]
			}
			t.Fatalf("waiting for %s; screen: %q", what, s)
		}
		time.Sleep(50 * time.Millisecond) // polling, bounded by the deadline
	}
}

// typeInto types text into a TUI until it is drawn (keys typed before its
// input box is ready are lost), then presses Enter.
func typeInto(t *testing.T, ptmx io.Writer, term *tuiTerm, text string) {
	t.Helper()
	squeezed := strings.ReplaceAll(text, " ", "")
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatalf("%q never drawn", text)
		}
		if attempt > 0 {
			ptmx.Write(bytes.Repeat([]byte{0x7f}, len(text)))
		}
		mark := len(term.drawn())
		ptmx.Write([]byte(text))
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) && !strings.Contains(term.drawn()[mark:], squeezed) {
			time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
		}
		if strings.Contains(term.drawn()[mark:], squeezed) {
			break
		}
	}
	ptmx.Write([]byte("\r"))
}

// sharedServers lists the processes of Codex's shared app server run from
// codexHome (its managed copy lives in codexHome/packages).
func sharedServers(codexHome string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(b), filepath.Join(codexHome, "packages")+"/") && sharedServer(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// The real Codex TUI 0.169.0 as a user runs it by default: through the
// shared background app server, which the first TUI starts (a copy of
// Codex in CODEX_HOME/packages, `codex app-server --listen unix://
// --managed-daemon`, in a session of its own, the TUI its parent) and which
// writes the rollouts of every TUI that uses it. RunCodexLocal runs one
// TUI (it starts the server), a second TUI started beside it in the same
// folder joins the same server; each asks something. Only the first's
// thread is reported.
func TestRealCodexLocalSharedServer(t *testing.T) {
	e := codextest.New(t)
	t.Cleanup(func() {
		// The server outlives the TUIs: stop those this test started.
		for _, pid := range sharedServers(e.CodexHome) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// Codex 0.169.0 offers a newer model in a popup on its first start in
	// a home, unless the offer was seen.
	cfg, err := os.OpenFile(filepath.Join(e.CodexHome, "config.toml"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.WriteString("\n[notice.model_migrations]\n\"" + codextest.Model + "\" = \"gpt-6-sol\"\n"); err != nil {
		t.Fatal(err)
	}
	cfg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, nil))
	defer func() { logMu.Lock(); t.Logf("log:\n%s", logBuf.String()); logMu.Unlock() }()

	// This run's TUI.
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	ours := &tuiTerm{ptmx: ptmx}
	go io.Copy(ours, ptmx)
	var mu sync.Mutex
	var threads []string
	done := make(chan error, 1)
	go func() {
		_, err := RunCodexLocal(ctx, CodexLocalOptions{Codex: e.Codex, Dir: e.Project, Env: e.Environ(), CodexHome: e.CodexHome,
			Stdin: tty, Stdout: tty, Stderr: tty, Logger: log, ScanEvery: 50 * time.Millisecond,
			OnThread: func(p string, _ *codex.SessionMeta) {
				id, _ := codex.ThreadID(p)
				mu.Lock()
				threads = append(threads, id)
				mu.Unlock()
			}})
		tty.Close()
		done <- err
	}()
	screen := func() string { return ours.drawn() }
	waitTUI(t, "the input box", func() bool { return strings.Contains(ours.drawn(), "?forshortcuts") }, screen)
	typeInto(t, ptmx, ours, "SLOWTEXT from this run")
	if err := e.API.WaitPaused(ctx, 1); err != nil {
		t.Fatal(err)
	}
	reported := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), threads...)
	}
	waitTUI(t, "the run's thread reported", func() bool { return len(reported()) > 0 }, screen)
	if len(sharedServers(e.CodexHome)) == 0 {
		t.Fatal("no shared app server runs: the TUI did not take its default path")
	}

	// Another TUI in the same folder, through the same server.
	other := exec.CommandContext(ctx, e.Codex)
	other.Dir, other.Env = e.Project, e.Environ()
	optmx, err := pty.StartWithSize(other, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer optmx.Close()
	theirs := &tuiTerm{ptmx: optmx}
	go io.Copy(theirs, optmx)
	otherDone := make(chan error, 1)
	go func() { otherDone <- other.Wait() }()
	oscreen := func() string { return theirs.drawn() }
	waitTUI(t, "the other TUI's input box", func() bool { return strings.Contains(theirs.drawn(), "?forshortcuts") }, oscreen)
	typeInto(t, optmx, theirs, "hello from another TUI")
	reply := strings.ReplaceAll(fakeresponses.TextReply, " ", "")
	waitTUI(t, "the other TUI's answer", func() bool { return strings.Contains(theirs.drawn(), reply) }, oscreen)
	var otherRollout string
	waitTUI(t, "the other TUI's rollout", func() bool {
		for _, r := range e.Rollouts(t) {
			if b, err := os.ReadFile(r); err == nil && bytes.Contains(b, []byte("hello from another TUI")) {
				otherRollout = r
				return true
			}
		}
		return false
	}, oscreen)
	t.Logf("the other TUI's rollout, seen from this test's process tree (which runs the shared server): %v", holderOf(otherRollout, os.Getpid()))

	e.API.Release()
	waitTUI(t, "this run's answer", func() bool { return strings.Contains(ours.drawn(), "slowly") }, screen)
	typeInto(t, optmx, theirs, "/quit")
	typeInto(t, ptmx, ours, "/quit")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatalf("RunCodexLocal did not return after /quit; screen: %q", screen())
	}
	select {
	case <-otherDone:
	case <-ctx.Done():
		t.Fatal("the other TUI did not exit after /quit")
	}
	got := reported()
	if len(got) != 1 {
		t.Fatalf("threads reported %v, want this run's alone (rollouts %v)", got, e.Rollouts(t))
	}
	for _, r := range e.Rollouts(t) {
		if id, _ := codex.ThreadID(r); id == got[0] {
			if b, err := os.ReadFile(r); err != nil || !bytes.Contains(b, []byte("SLOWTEXT from this run")) {
				t.Fatalf("the thread reported, %s, is not this run's (%v)", r, err)
			}
			return
		}
	}
	t.Fatalf("the thread reported, %s, has no rollout", got[0])
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
