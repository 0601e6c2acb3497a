package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/config"
	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/relay"
)

// The real Claude Code run as plain `claude` in a terminal, with the hook
// of ccrelay follow install: the session reaches the relay while Claude
// runs; after /clear the new session is followed too; both end with
// /exit, each on the relay as replay maps its transcript, its last turn
// closed.
func TestRealClaudeFollowInteractive(t *testing.T) {
	for _, in := range claudetest.Installs(t) {
		t.Run(in.Version, func(t *testing.T) { realClaudeFollowInteractive(t, in.Path) })
	}
}

func realClaudeFollowInteractive(t *testing.T, bin string) {
	e := claudetest.NewWith(t, bin,
		fakeapi.Rule{LastUserContains: "first", Reply: []fakeapi.Block{fakeapi.Text("answer one")}},
		fakeapi.Rule{LastUserContains: "second", Reply: []fakeapi.Block{fakeapi.Text("answer two")}},
		fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("noted")}})
	data, state := t.TempDir(), t.TempDir()
	srv, base, token := startServe(t, data)
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := config.Remember(state, base, ""); err != nil {
		t.Fatal(err)
	}
	e.Extra = append(e.Extra, "CCRELAY_TOKEN="+token)
	install := exec.Command(binary, "follow", "install", "--state", state)
	install.Env = e.Environ()
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}

	cmd := exec.Command(e.Claude)
	cmd.Dir, cmd.Env = e.Project, e.Environ()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	scr := &watchWriter{phrase: "\x00", seen: make(chan struct{})}
	copied := make(chan struct{})
	go func() { io.Copy(scr, ptmx); close(copied) }()
	exited := waitChan(cmd)
	defer func() {
		select {
		case <-exited:
		default:
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
				t.Fatalf("waiting for %s; screen:\n%q\nlog:\n%s", what, tail(scr.text(), 2000), followLogText(state))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// sessionWith is the relayed session holding s ("": none yet).
	sessionWith := func(s string) string {
		st, err := relay.OpenStore(filepath.Join(data, "relay.db"))
		if err != nil {
			t.Fatal(err)
		}
		sessions, err := st.Sessions(context.Background())
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, ss := range sessions {
			if strings.Contains(strings.Join(storedLines(t, data, ss.ID), "\n"), s) {
				return ss.ID
			}
		}
		return ""
	}
	until("the input box", func() bool {
		s := scr.text()
		return strings.Contains(s, "? for shortcuts") || strings.Contains(s, "│ >") || strings.Contains(s, "❯")
	})
	typeInTerminal(t, ptmx, scr, "the first prompt")
	e.EnterUntilTaken(t, ptmx, "the first prompt", scr.text)
	until("the first answer on the relay", func() bool { return sessionWith("answer one") != "" })
	first := sessionWith("answer one")
	typeInTerminal(t, ptmx, scr, "/clear")
	// An older Claude Code's first Enter may only pick /clear in its
	// menu of commands: Enter again until the hook says the session
	// was cleared.
	for attempt := 0; !strings.Contains(followLogText(state), "source=clear"); attempt++ {
		if attempt == 10 {
			t.Fatalf("/clear never ran; screen:\n%q\nlog:\n%s", tail(scr.text(), 2000), followLogText(state))
		}
		deadline := time.Now().Add(3 * time.Second)
		for !strings.Contains(followLogText(state), "source=clear") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(followLogText(state), "source=clear") {
			ptmx.Write([]byte("\r"))
		}
	}
	typeInTerminal(t, ptmx, scr, "the second prompt")
	e.EnterUntilTaken(t, ptmx, "the second prompt", scr.text)
	until("the second answer on the relay", func() bool { return sessionWith("answer two") != "" })
	second := sessionWith("answer two")
	if second == first {
		t.Fatalf("after /clear the answer went to the first session %s", first)
	}
	typeInTerminal(t, ptmx, scr, "/exit")
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("claude did not exit on /exit; screen:\n%q", tail(scr.text(), 2000))
	}
	for _, s := range []string{first, second} {
		waitFollowerGone(t, state, s)
		matches, _ := filepath.Glob(filepath.Join(e.Home, ".claude", "projects", "*", s+".jsonl"))
		if len(matches) != 1 {
			t.Fatalf("transcript of %s: %v", s, matches)
		}
		want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", matches[0]).stdout, "\n"), "\n")
		got := storedLines(t, data, s)
		// The relay may hold one turn-end more: the follower ended the
		// turn Claude's exit left open, which replay leaves open.
		if len(got) != len(want) && (len(got) != len(want)+1 || !strings.Contains(got[len(got)-1], `"t":"turn-end"`)) {
			t.Fatalf("session %s: relay stored %d envelopes, replay has %d (+1 turn-end at most)\ngot:\n%s\nwant:\n%s", s, len(got), len(want), shortLines(got), shortLines(want))
		}
		sameEnvelopes(t, got[:len(want)], want)
		envs := make([]protocol.Envelope, len(got))
		for i, l := range got {
			if err := json.Unmarshal([]byte(l), &envs[i]); err != nil {
				t.Fatal(err)
			}
		}
		envtest.CheckInvariants(t, envs)
		open := map[string]bool{}
		for _, e := range envs {
			switch e.Ev.T {
			case protocol.KindTurnStart:
				open[e.Turn] = true
			case protocol.KindTurnEnd:
				delete(open, e.Turn)
			}
		}
		if len(open) > 0 {
			t.Fatalf("session %s: turns left open on the relay %v:\n%s", s, open, shortLines(got))
		}
	}
	if b, err := os.ReadFile(filepath.Join(state, "ccrelay.log")); err != nil || slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool {
		return strings.Contains(l, "level=ERROR")
	}) {
		t.Fatalf("log (%v):\n%s", err, b)
	}
}

// typeInTerminal types text into a terminal, waits until the program echoed it
// (typing again if the keys were lost while its input box was not ready),
// then presses Enter.
func typeInTerminal(t *testing.T, ptmx io.Writer, scr *watchWriter, text string) {
	t.Helper()
	squeezed := strings.ReplaceAll(text, " ", "")
	mark := len(scr.text())
	echoed := func() bool {
		// The screen draws spaces as cursor moves: compare without them,
		// and without the terminal's control sequences.
		drawn := testutil.TerminalText(scr.text()[mark:])
		return strings.Contains(strings.ReplaceAll(drawn, " ", ""), squeezed)
	}
	for attempt := 0; !echoed(); attempt++ {
		if attempt == 20 {
			t.Fatalf("%q never echoed; screen:\n%q", text, tail(scr.text(), 2000))
		}
		if attempt > 0 {
			ptmx.Write(bytes.Repeat([]byte{0x7f}, len(text)))
		}
		ptmx.Write([]byte(text))
		deadline := time.Now().Add(time.Second)
		for !echoed() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	ptmx.Write([]byte("\r"))
}
