package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/chromedp/chromedp"
)

// A sealed session's machine rejects a prompt with a reason it seals (as
// a Codex session's start error with app-server's stderr, or a folder):
// the relay holds only a neutral text, and the page shows the reason
// opened under the session's key where the prompt waited. A status whose
// reason this device cannot open shows a neutral text, never a failure.
func TestAppShowsSealedRejection(t *testing.T) {
	r, logPath := startLoggedAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone())
	state := pairBrowser(t, ctx, r)

	_, id := replaySealed(t, r, state)
	kr, err := openKeyring(state)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kr.SealInfo(id, json.RawMessage(`{"title":"a sealed session","machine":"laptop","mode":"remote","status":"idle"}`))
	if err != nil {
		t.Fatal(err)
	}
	cli := dialCLI(t, r)
	cli.request(protocol.Frame{Type: protocol.FrameAnnounce, Session: id, Info: info})

	r.open(t, ctx, id)
	waitJS(t, ctx, "the prompt box", `!document.querySelector('.composer textarea').disabled`)
	must(t, ctx, typeInto("textarea", "start the thread"), chromedp.Click(chromedp.CSS("button.send")))
	cmd := cli.next(protocol.FrameCommand)
	if cmd.Command == nil || cmd.Command.Sealed == "" {
		t.Fatalf("the prompt did not come sealed: %+v", cmd.Command)
	}
	if _, err := kr.OpenCommand(id, *cmd.Command); err != nil {
		t.Fatal(err)
	}
	const reason = "start the Codex thread: codex app-server: error loading /home/dev/MARKER-5e2b-folder/.codex/config.toml"
	sealed, err := kr.SealResult(id, cmd.Command.ID, reason)
	if err != nil {
		t.Fatal(err)
	}
	cli.request(protocol.Frame{Type: protocol.FrameResult, Session: id, Command: &protocol.Command{ID: cmd.Command.ID},
		Status: protocol.StatusRejected, Message: protocol.SealedResultMessage, SealedMessage: sealed})

	waitJS(t, ctx, "the rejection shown", `(() => { const p = document.querySelector('.pending-msg[data-status="rejected"] .pending-status'); return !!p && p.textContent.includes('MARKER-5e2b') })()`)
	if got := eval[string](t, ctx, `document.querySelector('.pending-msg[data-status="rejected"] .pending-status').textContent`); got != "Not sent: "+reason {
		t.Errorf("the page shows %q", got)
	}
	if found := relayFilesHold(t, r.data, logPath, "MARKER-5e2b"); len(found) > 0 {
		t.Errorf("the reason is in %v", found)
	}

	// A readable reason for a sealed session is the relay's, and says so:
	// the machine seals its own (a relay cannot pass off a text of its own
	// as the machine's). A plaintext session's stays as it is.
	for _, tt := range []struct{ name, session, want string }{
		{"sealed session", id, "the relay says (not sealed by the machine): run curl relay.example | sh to repair the key"},
		{"plaintext session", "0b0e0b0e-0000-4000-8000-0000000000f2", "run curl relay.example | sh to repair the key"},
	} {
		got := evalAwait[string](t, ctx, fmt.Sprintf(`import('./js/e2e.js').then(async (e2e) => {
		  const f = await e2e.openFrame({ v: 1, type: 'command-status', session: %q, command: { id: 'cz0000000000000000000002' }, status: 'rejected', message: 'run curl relay.example | sh to repair the key' });
		  return f.message;
		})`, tt.session))
		if got != tt.want {
			t.Errorf("%s: a readable reason shows as %q, want %q", tt.name, got, tt.want)
		}
	}

	// Without the key, or with a reason that does not open: a neutral text.
	for _, tt := range []struct{ name, session, sealed, want string }{
		{"no key", "0b0e0b0e-0000-4000-8000-0000000000f1", sealed, "RESULT_NO_KEY"},
		{"moved to another command", id, sealed, "RESULT_NOT_OPENED"},
	} {
		got := evalAwait[map[string]any](t, ctx, fmt.Sprintf(`import('./js/e2e.js').then(async (e2e) => {
		  const f = await e2e.openFrame({ v: 1, type: 'command-status', session: %q, command: { id: 'cz0000000000000000000001' }, status: 'rejected', message: 'neutral', sealedMessage: %q });
		  return { message: f.message, want: e2e[%q], sealed: f.sealedMessage === undefined ? '' : 'kept' };
		})`, tt.session, tt.sealed, tt.want))
		if got["message"] != got["want"] || got["want"] == nil || got["sealed"] != "" {
			t.Errorf("%s: %v", tt.name, got)
		}
		if !strings.Contains(fmt.Sprint(got["message"]), "end-to-end encrypted") {
			t.Errorf("%s: the page says %q", tt.name, got["message"])
		}
	}
}
