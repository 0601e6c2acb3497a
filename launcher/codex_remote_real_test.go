package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/codextest"
	"github.com/ccrelay/ccrelay/internal/fakeresponses"
	"github.com/ccrelay/ccrelay/mapper"
	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/scanner"
)

// The real Codex CLI 0.169.0 driven through app-server, offline against
// the fake Responses API, in one session: a text prompt, a shell command
// (run in the read-only sandbox, not asked), a patch the app accepts, a
// patch the app declines, an escalated command the app declines, an
// interrupt while the text streams. The approvals are shown and answered
// from the "app"; the envelopes the session sends, ccrelay's own notes
// aside, equal the replay of the rollout app-server wrote.
func TestRealCodexRemote(t *testing.T) {
	e := codextest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := &MemOutbox{}
	pipe := NewCodexPipeline(out, func(thread string) CodexMapper { return mapper.NewCodex(thread) })
	fol := scanner.NewCodexFollower(scanner.CodexConfig{PollInterval: 100 * time.Millisecond, Logger: log}, pipe)
	fctx, stopFollow := context.WithCancel(context.Background())
	folDone := make(chan error, 1)
	go func() { folDone <- fol.Run(fctx) }()
	defer func() {
		stopFollow()
		<-folDone
	}()
	rec := newCodexRecorder()
	cmds := make(chan Command)
	threads := make(chan string, 1)
	ctx, stop := context.WithCancel(context.Background())
	loopDone := make(chan error, 1)
	go func() {
		loopDone <- RunCodexRemote(ctx, CodexLoopOptions{
			Remote:   CodexRemoteOptions{Codex: e.Codex, Dir: e.Project, Env: e.Environ(), StopTimeout: 5 * time.Second},
			Pipeline: pipe, Follower: fol, Commands: cmds, Events: rec, Logger: log,
			OnThread: func(th string) { threads <- th }})
	}()
	stopped := false
	defer func() {
		if !stopped {
			stop()
			<-loopDone
		}
	}()
	var thread string
	select {
	case thread = <-threads:
	case err := <-loopDone:
		t.Fatalf("RunCodexRemote: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("no thread")
	}
	send := func(c protocol.Command) error {
		t.Helper()
		done := make(chan error, 1)
		cmds <- Command{Command: c, Reply: func(err error) { done <- err }}
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Minute):
			t.Fatalf("no reply to %s", c.Kind)
			return nil
		}
	}
	turnEnds := func() (n int, last protocol.Envelope) {
		for _, env := range out.Envelopes() {
			if env.Ev.T == protocol.KindTurnEnd {
				n++
				last = env
			}
		}
		return n, last
	}
	waitTurns := func(n int) protocol.Envelope {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			got, last := turnEnds()
			if got >= n {
				return last
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d turns ended, want %d; states %+v", got, n, rec.last())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitRequest := func(tool string) PermissionRequest {
		t.Helper()
		var pr PermissionRequest
		rec.waitFor(t, "a "+tool+" request", func() bool {
			st := rec.last()
			if len(st.Permissions) == 1 && st.Permissions[0].Tool == tool {
				pr = st.Permissions[0]
				return true
			}
			return false
		})
		// The app is told of the request after the call it names.
		found := false
		for _, env := range out.Envelopes() {
			found = found || (env.Ev.T == protocol.KindToolCallStart && env.Ev.Call == pr.Call)
		}
		if !found {
			t.Errorf("the %s request for call %s came before the call", tool, pr.Call)
		}
		return pr
	}
	prompt := func(text string) {
		t.Helper()
		if err := send(protocol.Command{Kind: protocol.CommandPrompt, Text: text}); err != nil {
			t.Fatalf("prompt %q: %v", text, err)
		}
	}

	prompt("TEXT say hello")
	waitTurns(1)
	prompt("SHELL list the files")
	waitTurns(2)

	prompt("PATCH add a file")
	pr := waitRequest(CodexToolPatch)
	if !strings.Contains(string(pr.Input), fakeresponses.PatchFile) || pr.Call == "" {
		t.Errorf("patch request %+v", pr)
	}
	if err := send(protocol.Command{Kind: protocol.CommandPermission, RequestID: pr.ID, Allow: true}); err != nil {
		t.Fatal(err)
	}
	waitTurns(3)
	if b, err := os.ReadFile(filepath.Join(e.Project, fakeresponses.PatchFile)); err != nil || string(b) != fakeresponses.PatchContent {
		t.Errorf("the accepted patch: %q %v", b, err)
	}

	prompt("PATCHEDIT edit the notes")
	pr = waitRequest(CodexToolPatch)
	if !strings.Contains(string(pr.Input), fakeresponses.EditFile) {
		t.Errorf("edit request %+v", pr)
	}
	if err := send(protocol.Command{Kind: protocol.CommandPermission, RequestID: pr.ID, Reason: "keep the notes as they are"}); err != nil {
		t.Fatal(err)
	}
	waitTurns(4)
	if b, _ := os.ReadFile(filepath.Join(e.Project, fakeresponses.EditFile)); string(b) != fakeresponses.EditBefore {
		t.Errorf("the declined edit changed the file: %q", b)
	}

	prompt("ESCALATE write a file")
	pr = waitRequest(CodexToolCommand)
	if !strings.Contains(string(pr.Input), "escalated.txt") || pr.Description != fakeresponses.EscalateJustification {
		t.Errorf("escalation request %+v", pr)
	}
	if err := send(protocol.Command{Kind: protocol.CommandPermission, RequestID: pr.ID}); err != nil {
		t.Fatal(err)
	}
	waitTurns(5)
	if _, err := os.Stat(filepath.Join(e.Project, "escalated.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the declined command ran: %v", err)
	}

	prompt("SLOWTEXT take your time")
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.API.WaitPaused(wctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := send(protocol.Command{Kind: protocol.CommandAbort}); err != nil {
		t.Fatal(err)
	}
	if last := waitTurns(6); last.Ev.Status == protocol.StatusCompleted {
		t.Errorf("the interrupted turn ended %s", last.Ev.Status)
	}
	rec.waitFor(t, "idle", func() bool { return rec.last().Status == StatusIdle })

	if len(processesIn(e.Project)) == 0 {
		t.Error("no app-server seen running in the project: the check below could not fail")
	}
	// The session stops; what the rollout holds is read.
	stop()
	if err := <-loopDone; err != nil {
		t.Fatal(err)
	}
	stopped = true
	// Nothing of Codex's outlives the session: no process runs in the
	// project any more.
	for deadline := time.Now().Add(20 * time.Second); ; {
		left := processesIn(e.Project)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left in the project after the session stopped: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fl, cancelFl := context.WithTimeout(context.Background(), time.Minute)
	defer cancelFl()
	if err := fol.Flush(fl); err != nil {
		t.Fatal(err)
	}
	rollouts := e.Rollouts(t)
	if len(rollouts) != 1 || !strings.Contains(rollouts[0], thread) {
		t.Fatalf("rollouts %v for thread %s", rollouts, thread)
	}
	var live, notes []protocol.Envelope
	for _, env := range out.Envelopes() {
		if env.Ev.T == protocol.KindService && strings.HasPrefix(env.Ev.Text, "Denied from the app: ") {
			notes = append(notes, env)
			continue
		}
		live = append(live, env)
	}
	if len(notes) != 1 || !strings.Contains(notes[0].Ev.Text, "keep the notes as they are") {
		t.Errorf("notes %+v", notes)
	}
	want := replayFiles(t, rollouts[0])
	t.Logf("%d envelopes live (%d notes), %d in replay", len(live), len(notes), len(want))
	if len(live) != len(want) {
		t.Errorf("live %d envelopes, replay %d", len(live), len(want))
	}
	for i := range min(len(live), len(want)) {
		a, _ := json.Marshal(live[i])
		b, _ := json.Marshal(want[i])
		if string(a) != string(b) {
			t.Errorf("envelope %d:\nlive   %s\nreplay %s", i, a, b)
			break
		}
	}
}

// processesIn lists the processes (pid: command line) whose working
// folder is dir (Linux; nothing elsewhere).
func processesIn(dir string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}
