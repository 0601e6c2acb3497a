package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/internal/fakeresponses"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
)

// termAnswers stands for the terminal emulator the Codex TUI talks to: it
// records the screen and answers the TUI's queries (cursor position,
// device attributes, colours), which it waits for.
type termAnswers struct {
	scr  *watchWriter
	mu   sync.Mutex
	ptmx io.Writer
}

func (a *termAnswers) Write(p []byte) (int, error) {
	a.scr.Write(p)
	s := string(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if strings.Contains(s, "\x1b[6n") {
		a.ptmx.Write([]byte("\x1b[1;1R"))
	}
	if strings.Contains(s, "\x1b[c") {
		a.ptmx.Write([]byte("\x1b[?62;22c"))
	}
	if strings.Contains(s, "\x1b]10;?") {
		a.ptmx.Write([]byte("\x1b]10;rgb:ffff/ffff/ffff\x1b\\"))
	}
	if strings.Contains(s, "\x1b]11;?") {
		a.ptmx.Write([]byte("\x1b]11;rgb:0000/0000/0000\x1b\\"))
	}
	return len(p), nil
}

// The real Codex TUI (0.169.0, offline against the fake Responses API) run
// by `ccrelay codex` in a terminal: ccrelay's first line says where the
// session goes; a prompt typed in the TUI reaches the relay as the thread's
// session (its id the thread's), announced as Codex's with its model and
// version; after /quit Codex's exit code is ccrelay's, the relay holds what
// replay of the rollout gives (live = replay), and ccrelay says how to go
// on with the thread.
//
// Both ways the TUI runs: with its own app server (--no-daemon), where a
// new thread in the same run (/new) is a session of its own, and through
// Codex's shared background app server, the TUI's default, where only the
// run's first thread is followed, as ccrelay's first line says: the /new
// thread is not relayed (nothing tells it from another terminal's).
func TestRealCodexLocal(t *testing.T) {
	t.Run("own server", func(t *testing.T) { realCodexLocal(t, false) })
	t.Run("shared server", func(t *testing.T) { realCodexLocal(t, true) })
}

func realCodexLocal(t *testing.T, shared bool) {
	e := codextest.New(t)
	if shared {
		// The server outlives the TUI: stop the one this run started.
		t.Cleanup(func() {
			for _, pid := range codexSharedServers(e.CodexHome) {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		})
	}
	data, state := t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := config.Remember(state, base, ""); err != nil {
		t.Fatal(err)
	}
	// Codex 0.169.0 offers a newer model in a popup over the input box on
	// its first start in a home, unless the offer was seen: it was.
	cfg, err := os.OpenFile(filepath.Join(e.CodexHome, "config.toml"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.WriteString("\n[notice.model_migrations]\n\"" + codextest.Model + "\" = \"gpt-6-sol\"\n"); err != nil {
		t.Fatal(err)
	}
	cfg.Close()
	// --no-daemon: the TUI's own app server writes the rollouts, instead
	// of a shared app server that outlives it (the first TUI copies
	// Codex, 400 MB, into CODEX_HOME for it).
	args := []string{"codex", "--state", state, "--codex", e.Codex}
	if !shared {
		args = append(args, "--no-daemon")
	}
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = e.Project, append(e.Environ(), "CCRELAY_TOKEN="+token)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	scr := &watchWriter{phrase: "\x00", seen: make(chan struct{})}
	copied := make(chan struct{})
	go func() { io.Copy(&termAnswers{scr: scr, ptmx: ptmx}, ptmx); close(copied) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			<-exited
		}
		ptmx.Close()
		<-copied
	}()
	until := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; screen:\n%q\nlog:\n%s", what, tail(scr.text(), 3000), tail(codexLogText(state), 3000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var threads []string
	until("the first line", func() bool { return strings.Contains(scr.text(), "ccrelay: relaying Codex to "+base) })
	which := "each thread it runs here is a session in the app"
	if shared {
		which = "its first thread here is a session in the app, a thread started after it (/new) is not: Codex's shared background app server"
	}
	if !strings.Contains(scr.text(), which) {
		t.Errorf("the first line does not say %q:\n%q", which, tail(scr.text(), 3000))
	}
	drawn := func() string { return strings.ReplaceAll(testutil.TerminalText(scr.text()), " ", "") }
	until("the input box", func() bool { return strings.Contains(drawn(), "?forshortcuts") })
	// answered waits for the n-th thread of the run (by its rollout) to
	// hold the fake's answer on the relay, and returns its id.
	answered := func(n int) string {
		var thread string
		until("the answer of thread "+string(rune('0'+n))+" on the relay", func() bool {
			rs := e.Rollouts(t)
			if len(rs) < n {
				return false
			}
			for _, r := range rs {
				id, _ := codex.ThreadID(r)
				if id == "" || slices.Contains(threads, id) {
					continue
				}
				if strings.Contains(strings.Join(storedLines(t, data, id), "\n"), fakeresponses.TextReply) {
					thread = id
					return true
				}
			}
			return false
		})
		return thread
	}
	typeInTerminal(t, ptmx, scr, "hello codex")
	threads = append(threads, answered(1))
	if shared && runtime.GOOS == "linux" && len(codexSharedServers(e.CodexHome)) == 0 {
		t.Fatal("no shared app server runs: the TUI did not take its default path")
	}
	// The model comes with the thread's turn_context, announced once
	// the envelopes before it are on the relay.
	until("the session announced as Codex's with its model", func() bool {
		info := relaySessionInfo(t, data, threads[0])
		return info["agent"] == "codex" && info["agentVersion"] == codextest.Version && info["model"] == codextest.Model && info["mode"] == "local"
	})
	// A new thread in the same run (/new) is a session of its own.
	mark := len(scr.text())
	typeInTerminal(t, ptmx, scr, "/new")
	// The new chat draws Codex's banner anew, or its logo in braille
	// (the TUI draws one or the other): before it, what is typed still
	// goes to the first thread.
	until("the new chat", func() bool {
		drawn := strings.ReplaceAll(testutil.TerminalText(scr.text()[mark:]), " ", "")
		return strings.Contains(drawn, ">_OpenAICodex(v") || strings.Contains(drawn, "⣿⣿⣿")
	})
	typeInTerminal(t, ptmx, scr, "hello again codex")
	var unfollowed string
	if shared {
		// Its answer is in its rollout; the relay is looked at once
		// ccrelay has ended.
		until("the new thread's answer in its rollout", func() bool {
			for _, r := range e.Rollouts(t) {
				b, _ := os.ReadFile(r)
				if id, _ := codex.ThreadID(r); id != threads[0] && strings.Contains(string(b), "hello again codex") && strings.Contains(string(b), fakeresponses.TextReply) {
					unfollowed = id
					return true
				}
			}
			return false
		})
	} else {
		threads = append(threads, answered(2))
	}
	typeInTerminal(t, ptmx, scr, "/quit")
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Fatalf("ccrelay codex: %v; screen:\n%q", err, tail(scr.text(), 3000))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("codex did not exit on /quit; screen:\n%q", tail(scr.text(), 3000))
	}
	until("the resume hint", func() bool { return strings.Contains(scr.text(), "ccrelay codex resume ") })
	// Live = replay: each rollout mapped afresh gives what the relay holds.
	for _, rollout := range e.Rollouts(t) {
		thread, _ := codex.ThreadID(rollout)
		if shared && thread == unfollowed {
			if got := storedLines(t, data, thread); len(got) > 0 {
				t.Fatalf("the thread started with /new through the shared server was relayed: %d envelopes", len(got))
			}
			continue
		}
		if !slices.Contains(threads, thread) {
			t.Fatalf("rollout %s is no thread relayed (%v)", rollout, threads)
		}
		checkLiveIsReplay(t, data, rollout, thread)
	}
}

// checkLiveIsReplay compares what the relay holds of thread with the
// mapping of its rollout.
func checkLiveIsReplay(t *testing.T, data, rollout, thread string) {
	t.Helper()
	want := replayRollout(t, rollout, thread)
	got := storedLines(t, data, thread)
	if len(got) != len(want) {
		t.Fatalf("relay holds %d envelopes, replay gives %d\nrelay:\n%s\nreplay:\n%s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("the relay holds the %d envelopes replay of the rollout gives", len(want))
	for i := range want {
		if !sameJSON(got[i], want[i]) {
			t.Fatalf("envelope %d differs:\nrelay:  %s\nreplay: %s", i, got[i], want[i])
		}
	}
}

// replayRollout maps a rollout as replay does: every line, then the end
// of the run.
func replayRollout(t *testing.T, path, thread string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := mapper.NewCodex(thread)
	var envs []protocol.Envelope
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		r, err := codex.Parse(sc.Bytes())
		if err != nil {
			continue
		}
		envs = append(envs, m.Map(r)...)
	}
	envs = append(envs, m.Close(protocol.StatusCompleted)...)
	var out []string
	for _, e := range envs {
		b, _ := json.Marshal(e)
		out = append(out, string(b))
	}
	return out
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// relaySessionInfo is the info the relay keeps for session.
func relaySessionInfo(t *testing.T, data, session string) map[string]any {
	t.Helper()
	st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.ID == session {
			var m map[string]any
			json.Unmarshal(s.Info, &m)
			return m
		}
	}
	t.Fatalf("no session %s on the relay", session)
	return nil
}

// codexLogText is ccrelay's log in state.
func codexLogText(state string) string {
	b, _ := os.ReadFile(filepath.Join(state, "ccrelay.log"))
	return string(b)
}

// codexSharedServers lists the processes of Codex's shared app server
// run from codexHome (the first TUI starts it, and its updater, from its
// copy of Codex in codexHome/packages; they outlive the TUI). Where there
// is no /proc it finds none.
func codexSharedServers(codexHome string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	prefix := filepath.Join(codexHome, "packages") + string(filepath.Separator)
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline")); err == nil && strings.HasPrefix(string(b), prefix) {
			pids = append(pids, pid)
		}
	}
	return pids
}
