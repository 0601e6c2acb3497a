package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/internal/codextest"
	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// ccrelay codex --remote with the real Codex 0.169.0 offline, killed
// between taking a prompt from the app and its answer: the relay hands the
// prompt to the next ccrelay of the thread, which answers it from the
// thread's rollout: done where Codex had taken it (it is in the rollout
// once, not run again), rejected saying so where ccrelay was killed before
// Codex got it. Killed at a new thread's first prompt, before Codex wrote
// the thread (it has no rollout until its first turn), the thread cannot
// be resumed: the next ccrelay asked for it starts a new thread, and the
// old session's prompt is rejected saying why and where the thread goes
// on, its session says so too, never left delivered.
func TestRealCodexPromptThroughKill(t *testing.T) {
	for _, tc := range []struct {
		step  string
		first bool // killed at the thread's first prompt
		taken bool // Codex may have taken the prompt
	}{
		{crashpoint.CodexPromptTaken, false, true},
		{crashpoint.LedgerBegun, false, false},
		{crashpoint.CodexPromptTaken, true, true},
		{crashpoint.LedgerBegun, true, false},
	} {
		name := tc.step
		if tc.first {
			name += "/first"
		}
		t.Run(name, func(t *testing.T) {
			e := codextest.New(t)
			srv, base, token := startServe(t, t.TempDir())
			defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
			state := t.TempDir()
			start := func(crashAt string, args ...string) (*exec.Cmd, *testutil.SyncBuffer, chan error) {
				cmd := exec.Command(binary, append([]string{"codex", "--remote", "--codex", e.Codex, "--state", state, "--relay", base, "--relay-token", token}, args...)...)
				cmd.Dir, cmd.Env = e.Project, append(e.Environ(), crashpoint.Env+"="+crashAt)
				var stderr testutil.SyncBuffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				waited := make(chan struct{})
				go func() {
					exited <- cmd.Wait()
					close(waited)
				}()
				// Ended before Codex's home is removed: asked first (it stops
				// app-server and waits for it), killed past a minute.
				t.Cleanup(func() {
					cmd.Process.Signal(syscall.SIGTERM)
					select {
					case <-waited:
					case <-time.After(time.Minute):
						cmd.Process.Kill()
						<-waited
					}
				})
				return cmd, &stderr, exited
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			app, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws/app", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
			if err != nil {
				t.Fatal(err)
			}
			defer app.CloseNow()
			frames := make(chan protocol.Frame, 1024)
			go func() {
				for {
					_, b, err := app.Read(ctx)
					if err != nil {
						close(frames)
						return
					}
					var f protocol.Frame
					if json.Unmarshal(b, &f) == nil {
						frames <- f
					}
				}
			}()
			send := func(f protocol.Frame) {
				f.V = protocol.FrameVersion
				b, _ := json.Marshal(f)
				if err := app.Write(ctx, websocket.MessageText, b); err != nil {
					t.Fatal(err)
				}
			}
			next := func(what string, stderr *testutil.SyncBuffer) protocol.Frame {
				select {
				case f, ok := <-frames:
					if !ok {
						t.Fatalf("the app's connection ended waiting for %s", what)
					}
					return f
				case <-ctx.Done():
					t.Fatalf("timed out waiting for %s; stderr: %s", what, stderr.String())
				}
				return protocol.Frame{}
			}

			// The second time the step is met: the first prompt makes the
			// thread's rollout, which the next ccrelay resumes; or the
			// first time, before Codex wrote the thread.
			crashAt := tc.step + "@2"
			if tc.first {
				crashAt = tc.step
			}
			_, stderr, exited := start(crashAt)
			// The thread, listed once app-server started it.
			thread := codexSessionListed(t, send, next, stderr, "")
			send(protocol.Frame{Type: protocol.FrameSubscribe, Session: thread})
			first := protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: "TEXT first"}
			if !tc.first {
				send(protocol.Frame{Type: protocol.FrameCommand, Session: thread, Command: &first})
			}
			for done, ended := tc.first, tc.first; !done || !ended; {
				f := next("the first prompt's turn", stderr)
				switch f.Type {
				case protocol.FrameStatus:
					if f.Command != nil && f.Command.ID == first.ID {
						if f.Status == protocol.StatusRejected {
							t.Fatalf("the first prompt was rejected: %s", f.Message)
						}
						done = done || f.Status == protocol.StatusDone
					}
				case protocol.FrameBatch:
					for _, it := range f.Items {
						ended = ended || strings.Contains(string(it.Envelope), `"turn-end"`)
					}
				}
			}
			prompt := protocol.Command{ID: protocol.New(), Kind: protocol.CommandPrompt, Text: "TEXT say hello"}
			send(protocol.Frame{Type: protocol.FrameCommand, Session: thread, Command: &prompt})
			for killed := false; !killed; {
				select {
				case <-exited:
					killed = true
				case f := <-frames:
					if f.Type == protocol.FrameError || f.Type == protocol.FrameStatus && f.Status == protocol.StatusRejected {
						t.Fatalf("the prompt was rejected: %s", f.Message)
					}
				case <-ctx.Done():
					t.Fatalf("ccrelay was not killed at %s; stderr: %s", tc.step, stderr.String())
				}
			}

			// The next ccrelay of the thread gets the prompt again.
			_, stderr, _ = start("", "--session", thread)
			var status, message, note string
			noted := func(f protocol.Frame) {
				if f.Type == protocol.FrameBatch && f.Session == thread {
					for _, it := range f.Items {
						if s := string(it.Envelope); strings.Contains(s, `"service"`) && strings.Contains(s, "cannot go on") {
							note = s
						}
					}
				}
			}
			for status != protocol.StatusDone && status != protocol.StatusRejected {
				f := next("the prompt's outcome", stderr)
				noted(f)
				if f.Type == protocol.FrameStatus && f.Command != nil && f.Command.ID == prompt.ID {
					status, message = f.Status, f.Message
				}
			}
			path, err := codex.FindRollout(e.CodexHome, thread)
			if tc.first && err != nil {
				// Codex never wrote the thread: a new one took its place,
				// which the prompt's answer and the old session name.
				for note == "" {
					noted(next("the old session's note", stderr))
				}
				newThread := codexSessionListed(t, send, next, stderr, thread)
				want := launcher.CodexThreadGone(thread, newThread).Error()
				if status != protocol.StatusRejected || message != want {
					t.Fatalf("the prompt to the thread Codex never wrote: %s %q, want rejected %q", status, message, want)
				}
				if !strings.Contains(note, newThread) {
					t.Fatalf("the old session's note does not name the new thread %s: %s", newThread, note)
				}
				// Its listed info says it ended, and where it goes on: the
				// app offers no resume for it.
				codexSessionInfoSays(t, send, next, stderr, thread, `"ended":true`, `"continuedAs":"`+newThread+`"`)
				t.Logf("the prompt to the thread Codex never wrote (killed at %s): %s", tc.step, message)
				return
			}
			// The status is final and true: done if Codex wrote the prompt
			// to the rollout (once), rejected saying so if not. Killed at
			// ledger-begun, Codex never got it; killed once app-server
			// answered turn/start, Codex usually wrote it first, but may
			// have died before (Pdeathsig): then it was not run either.
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			n := strings.Count(string(b), `"role":"user","content":[{"type":"input_text","text":"TEXT say hello"}]`)
			switch {
			case status == protocol.StatusDone && n == 1 && tc.taken:
			case status == protocol.StatusRejected && n == 0 && message == launcher.ErrCodexPromptLost.Error():
			default:
				t.Fatalf("the prompt after the kill: %s %q, and the rollout holds it %d times; stderr: %s", status, message, n, stderr.String())
			}
			t.Logf("the prompt after the kill at %s: %s", tc.step, status)
		})
	}
}

// codexSessionInfoSays asks the relay for its sessions until the listed
// info of session holds each of want.
func codexSessionInfoSays(t *testing.T, send func(protocol.Frame), next func(string, *testutil.SyncBuffer) protocol.Frame, stderr *testutil.SyncBuffer, session string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		send(protocol.Frame{Type: protocol.FrameList})
		f := next("the list", stderr)
		for f.Type != protocol.FrameSessions {
			f = next("the list", stderr)
		}
		info := ""
		for _, s := range f.Sessions {
			if s.ID == session {
				info = string(s.Info)
			}
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(info, w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listed info of %s lacks %s: %s", session, missing, info)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// codexSessionListed asks the relay for its sessions until a remote Codex
// session other than not is listed, and returns its id.
func codexSessionListed(t *testing.T, send func(protocol.Frame), next func(string, *testutil.SyncBuffer) protocol.Frame, stderr *testutil.SyncBuffer, not string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		send(protocol.Frame{Type: protocol.FrameList})
		f := next("the list", stderr)
		for f.Type != protocol.FrameSessions {
			f = next("the list", stderr)
		}
		for _, s := range f.Sessions {
			if s.ID != not && strings.Contains(string(s.Info), `"agent":"codex"`) && strings.Contains(string(s.Info), `"mode":"remote"`) {
				return s.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Codex session listed; stderr: %s", stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
