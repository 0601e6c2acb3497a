package launcher

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// A prompt or a permission answer from the app that a ccrelay began and
// never ended (killed between receiving it and its answer: Codex died with
// it) is answered, when the relay delivers it to the next ccrelay, with
// what the thread's rollout says became of it, as a Claude session's
// transcript does: a prompt Codex wrote as the user's message is done
// (never run again), one it never got is rejected saying so; an answer
// whose call has its output in the rollout is done, one that never reached
// Codex is rejected saying the request no longer waits. The outcome is
// recorded: a later repeat gets the same.
func TestCodexRemoteKilledMidCommand(t *testing.T) {
	dir := t.TempDir()
	rollout := filepath.Join(dir, "sessions", "2026", "11", "27", "rollout-2026-11-27T15-46-37-"+fakeThreadID+".jsonl")
	if err := os.MkdirAll(filepath.Dir(rollout), 0o700); err != nil {
		t.Fatal(err)
	}
	line := func(v any) string {
		b, _ := json.Marshal(map[string]any{"timestamp": "2026-11-27T15:46:37.000Z", "type": "response_item", "payload": v})
		return string(b) + "\n"
	}
	appendRollout := func(s string) {
		t.Helper()
		f, err := os.OpenFile(rollout, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	appendRollout(`{"timestamp":"2026-11-27T15:46:37.000Z","type":"session_meta","payload":{"id":"` + fakeThreadID + `"}}` + "\n")
	script := filepath.Join(dir, "script.json")
	b, _ := json.Marshal(fakeScript{Hang: true, Path: rollout})
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeCodex{rec: newCodexRecorder(), log: filepath.Join(dir, "client.jsonl")}
	env := append(os.Environ(), fakeAppServerEnv+"=1", fakeAppServerScript+"="+script, fakeAppServerLog+"="+fake.log)
	ledgerPath := filepath.Join(dir, "commands.jsonl")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// run is one ccrelay on the fake app-server, its ledger at ledgerPath.
	run := func() (send func(protocol.Command) error, stop func()) {
		t.Helper()
		ledger, err := OpenLedger(ledgerPath)
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

	// A prompt is begun with the rollout's size then.
	before := rolloutSize(rollout)
	send, stop := run()
	if err := send(protocol.Command{ID: "c-first", Kind: protocol.CommandPrompt, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	stop()
	raw, _ := os.ReadFile(ledgerPath)
	if !strings.Contains(string(raw), `{"id":"c-first","s":"started","at":`+itoa(before)+`}`) {
		t.Errorf("the prompt was not begun with the rollout's size %d: %s", before, raw)
	}

	// What a ccrelay killed while carrying these out leaves: each begun
	// (with the rollout's size then), none ended; Codex had written the
	// first prompt and the first answer's result.
	killed, err := OpenLedger(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	at := rolloutSize(rollout)
	cmds := []protocol.Command{
		{ID: "c-taken", Kind: protocol.CommandPrompt, Text: "a prompt Codex took"},
		{ID: "c-lost", Kind: protocol.CommandPrompt, Text: "a prompt Codex never got"},
		{ID: "c-answered", Kind: protocol.CommandPermission, RequestID: "call_7", Allow: true},
		{ID: "c-unanswered", Kind: protocol.CommandPermission, RequestID: "call_8", Allow: true},
		{ID: "c-abort", Kind: protocol.CommandAbort},
	}
	for _, c := range cmds {
		if c.Kind == protocol.CommandAbort {
			_, _, err = killed.Begin(c.ID)
		} else {
			_, _, err = killed.BeginPrompt(c.ID, at)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	killed.Close()
	appendRollout(line(map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "a prompt Codex took"}}}) +
		line(map[string]any{"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "call_7"}) +
		line(map[string]any{"type": "function_call_output", "call_id": "call_7", "output": "ok"}) +
		line(map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>a prompt Codex never got</environment_context>"}}}))

	want := map[string]error{"c-taken": nil, "c-lost": ErrCodexPromptLost, "c-answered": nil, "c-unanswered": ErrCodexAnswerLost, "c-abort": ErrInterrupted}
	check := func(send func(protocol.Command) error, when string) {
		t.Helper()
		for _, c := range cmds {
			got := send(c)
			if (got == nil) != (want[c.ID] == nil) || (got != nil && got.Error() != want[c.ID].Error()) {
				t.Errorf("%s %s delivered again: %v, want %v", when, c.ID, got, want[c.ID])
			}
		}
	}
	send, stop = run() // the next ccrelay
	check(send, "after the kill")
	stop()
	send, _ = run()
	check(send, "once more")
	if got := fake.sent(t, codex.MethodTurnStart); len(got) != 1 {
		t.Errorf("turn/start %d times, want 1 (a prompt ran again)", len(got))
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A command for a thread Codex has no rollout of is rejected with why, and
// recorded: one begun by a ccrelay that was killed, or new, is rejected
// (never left unanswered), a repeat gets the same answer, and one that had
// reached its end before keeps its outcome.
func TestAnswerGoneThread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commands.jsonl")
	killed, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := killed.BeginPrompt("c-begun", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := killed.Begin("c-done"); err != nil {
		t.Fatal(err)
	}
	if err := killed.Finish("c-done", nil); err != nil {
		t.Fatal(err)
	}
	killed.Close()
	why := CodexThreadGone(fakeThreadID, "01a21c00-53f4-7513-90cd-7879df4a4931")
	answer := func(l *Ledger, id string) (error, bool) {
		var got error
		replied := false
		AnswerGoneThread(l, Command{Command: protocol.Command{ID: id, Kind: protocol.CommandPrompt, Text: "go"}, Reply: func(err error) { got, replied = err, true }}, why)
		return got, replied
	}
	for round := range 2 {
		l, err := OpenLedger(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			id   string
			want error
		}{
			{"c-begun", why},
			{"c-new", why},
			{"c-done", nil},
		} {
			got, replied := answer(l, tc.id)
			if !replied || errString(got) != errString(tc.want) {
				t.Errorf("round %d, %s: replied %v with %v, want %v", round, tc.id, replied, got, tc.want)
			}
		}
		l.Close()
	}
	if !strings.Contains(why.Error(), fakeThreadID) || !strings.Contains(why.Error(), "01a21c00-53f4-7513-90cd-7879df4a4931") {
		t.Errorf("the answer does not name both threads: %v", why)
	}
}
