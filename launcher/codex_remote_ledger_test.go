package launcher

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// A command the relay delivers again after ccrelay restarted (a new
// RunCodexRemote on the same state folder, so the same ledger) is
// answered with the outcome recorded the first time, and not carried out
// again: a prompt starts no second turn, a permission answer is not given
// again, an abort does not interrupt again, a refusal is refused with the
// same words.
func TestCodexRemoteLedger(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	b, _ := json.Marshal(fakeScript{Hang: true, Steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
		"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_1", "command": "ls", "startedAtMs": 1})}}})
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeCodex{rec: newCodexRecorder(), log: filepath.Join(dir, "client.jsonl")}
	env := append(os.Environ(), fakeAppServerEnv+"=1", fakeAppServerScript+"="+script, fakeAppServerLog+"="+fake.log)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// run is one ccrelay: its ledger opened in the state folder, its
	// RunCodexRemote on the fake app-server; the returned stop ends both.
	run := func() (send func(protocol.Command) error, stop func()) {
		t.Helper()
		ledger, err := OpenLedger(filepath.Join(state, "commands.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		cmds := make(chan Command)
		threads := make(chan string, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- RunCodexRemote(ctx, CodexLoopOptions{
				Remote:   CodexRemoteOptions{Codex: self, Dir: dir, Env: env, StopTimeout: 2 * time.Second},
				Commands: cmds, Events: fake.rec, Logger: log, Ledger: ledger,
				OnThread: func(th string) { threads <- th }})
		}()
		select {
		case <-threads:
		case err := <-done:
			t.Fatalf("RunCodexRemote: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("no thread")
		}
		send = func(c protocol.Command) error {
			t.Helper()
			replies := make(chan error, 1)
			cmds <- Command{Command: c, Reply: func(err error) { replies <- err }}
			select {
			case err := <-replies:
				return err
			case <-time.After(time.Minute):
				t.Fatalf("no reply to %s %s", c.Kind, c.ID)
				return nil
			}
		}
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("RunCodexRemote: %v", err)
			}
			ledger.Close()
		}
		t.Cleanup(stop)
		return send, stop
	}

	commands := []protocol.Command{
		{ID: "c-prompt", Kind: protocol.CommandPrompt, Text: "go"},
		{ID: "c-allow", Kind: protocol.CommandPermission, RequestID: "call_1", Allow: true},
		{ID: "c-abort", Kind: protocol.CommandAbort},
		{ID: "c-mode", Kind: protocol.CommandPermissionMode, Mode: "plan"},
	}
	errText := func(err error) string {
		if err == nil {
			return "done"
		}
		return "rejected: " + err.Error()
	}
	first := map[string]string{}
	send, stop := run()
	for _, c := range commands {
		first[c.ID] = errText(send(c))
		if c.Kind == protocol.CommandPrompt {
			fake.rec.waitFor(t, "the request shown", func() bool { return len(fake.rec.last().Permissions) == 1 })
		}
	}
	for _, id := range []string{"c-prompt", "c-allow", "c-abort"} {
		if first[id] != "done" {
			t.Fatalf("first delivery of %s: %s", id, first[id])
		}
	}
	if got := fake.waitAnswer(t, "101"); got != `{"result":{"decision":"accept"}}` {
		t.Fatalf("the request got %s", got)
	}
	stop()

	send, _ = run() // ccrelay restarted
	for _, c := range commands {
		if got := errText(send(c)); got != first[c.ID] {
			t.Errorf("%s delivered again after a restart: %s, first %s", c.ID, got, first[c.ID])
		}
	}
	if got := fake.sent(t, codex.MethodTurnStart); len(got) != 1 {
		t.Errorf("turn/start %d times, want 1 (the prompt ran again)", len(got))
	}
	if got := fake.sent(t, codex.MethodTurnInterrupt); len(got) != 1 {
		t.Errorf("turn/interrupt %d times, want 1 (the abort ran again)", len(got))
	}
}
