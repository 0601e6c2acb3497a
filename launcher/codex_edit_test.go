package launcher

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
)

// Codex takes no edited input with an approval: it runs the command (or
// the change) it asked for. An allow that brings an edited input is
// refused and the request keeps waiting, rather than accepted as if the
// edit were run; an allow with no input, or with the input as shown,
// allows what was asked. A question's answer is its input, as before.
func TestCodexRemoteEditedInputRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		ok    bool
	}{
		{name: "edited command", input: `{"command":"rm -rf build/tmp","cwd":"/p","description":""}`},
		{name: "edited cwd", input: `{"command":"rm -rf build","cwd":"/p/sub","description":""}`},
		{name: "no input", input: ``, ok: true},
		{name: "null input", input: `null`, ok: true},
		{name: "the input as shown", input: `{"description":"","cwd":"/p","command":"rm -rf build"}`, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeCodex(t, fakeScript{Steps: []fakeStep{{Request: codex.RequestCommandApproval, Params: params(map[string]any{
				"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_0008", "command": "rm -rf build", "cwd": "/p", "startedAtMs": 1})}}})
			f.prompt(t, "go")
			var pr PermissionRequest
			f.rec.waitFor(t, "the request shown", func() bool {
				st := f.rec.last()
				if len(st.Permissions) == 1 {
					pr = st.Permissions[0]
					return true
				}
				return false
			})
			err := f.r.Answer(pr.ID, true, json.RawMessage(tc.input), false, "")
			if tc.ok {
				if err != nil {
					t.Fatalf("allow: %v", err)
				}
				if got := f.waitAnswer(t, "101"); got != `{"result":{"decision":"accept"}}` {
					t.Errorf("app-server got %s", got)
				}
				return
			}
			if !errors.Is(err, ErrCodexEditedInput) {
				t.Fatalf("an allow with an edited input: %v, want ErrCodexEditedInput", err)
			}
			if _, ok := f.answers(t)["101"]; ok {
				t.Fatal("Codex was answered (it runs the command it asked for, not the edited one)")
			}
			if st := f.State(); len(st.Permissions) != 1 {
				t.Fatalf("the request no longer waits: %+v", st)
			}
			if err := f.r.Answer(pr.ID, false, nil, false, "run rm -rf build/tmp instead"); err != nil {
				t.Fatal(err)
			}
			if got := f.waitAnswer(t, "101"); got != `{"result":{"decision":"decline"}}` {
				t.Errorf("app-server got %s", got)
			}
		})
	}
}

func (f *fakeCodex) State() SessionState { return f.r.State() }
