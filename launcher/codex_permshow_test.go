package launcher

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
	"github.com/ccrelay/ccrelay/protocol"
)

// TestCodexRemoteBigRequestShown: a file change of many paths whose diffs
// come to MaxCodexDiff is shown clipped, within the relay's bound on an
// announcement, its rules for the session bounded; the app's allow
// accepts the change Codex asked.
func TestCodexRemoteBigRequestShown(t *testing.T) {
	const paths = 3 * MaxShownItems
	var changes []map[string]any
	for i := range paths {
		n := MaxCodexDiff / paths
		if i == 0 {
			n += MaxCodexDiff % paths
		}
		changes = append(changes, map[string]any{"path": fmt.Sprintf("/p/f%03d.txt", i), "kind": map[string]any{"type": "add"},
			"diff": strings.Repeat("+", n)})
	}
	f := startFakeCodex(t, fakeScript{Steps: []fakeStep{
		{Notify: codex.NotifyItemStarted, Params: params(map[string]any{"threadId": fakeThreadID, "turnId": fakeTurn,
			"item": map[string]any{"type": "fileChange", "id": "call_big", "status": "inProgress", "changes": changes}})},
		{Request: codex.RequestFileChangeApproval, Params: params(map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": "call_big", "startedAtMs": 1})}}})
	f.prompt(t, "go")
	var st SessionState
	f.rec.waitFor(t, "the request shown", func() bool {
		st = f.rec.last()
		return len(st.Permissions) == 1
	})
	b, _ := json.Marshal(st)
	pr := st.Permissions[0]
	if len(b) > protocol.MaxInfoBytes || len(pr.Input) > MaxShownRequest || !pr.Clipped || len(pr.ForSession) != MaxShownRules ||
		pr.ForSession[MaxShownRules-1] != fmt.Sprintf("and %d more", paths-MaxShownRules+1) || !strings.Contains(string(pr.Input), "/p/f000.txt") {
		t.Fatalf("state of %d bytes, input of %d, clipped %v, for the session %q", len(b), len(pr.Input), pr.Clipped, pr.ForSession)
	}
	if err := f.r.Answer(pr.ID, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	if got := f.waitAnswer(t, "102"); got != `{"result":{"decision":"accept"}}` {
		t.Errorf("app-server got %s", got)
	}
}
