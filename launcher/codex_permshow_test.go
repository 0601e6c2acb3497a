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

// TestCodexKeepChangesBounded: a fileChange item of many paths, or of a
// path of megabytes, is kept within bounds: at most MaxCodexChangePaths
// paths each of at most MaxCodexPath bytes, then one entry saying how many
// more there were.
func TestCodexKeepChangesBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		changes  []codex.FileUpdateChange
		wantLen  int
		wantLast string
	}{
		{"few", []codex.FileUpdateChange{{Path: "/p/a", Diff: "+a"}, {Path: "/p/b", Diff: "+b"}}, 2, "/p/b"},
		{"many paths", func() []codex.FileUpdateChange {
			var c []codex.FileUpdateChange
			for i := range 10 * MaxCodexChangePaths {
				c = append(c, codex.FileUpdateChange{Path: fmt.Sprintf("/p/f%d", i), Diff: "+"})
			}
			return c
		}(), MaxCodexChangePaths + 1, fmt.Sprintf("(and %d more files)", 9*MaxCodexChangePaths)},
		{"a long path", []codex.FileUpdateChange{{Path: "/p/" + strings.Repeat("d", 4<<20), Diff: "+"}}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &CodexRemote{changes: map[string][]codex.FileUpdateChange{}}
			r.keepChanges("item", tc.changes)
			kept := r.changes["item"]
			size := 0
			for _, c := range kept {
				if len(c.Path) > MaxCodexPath+64 {
					t.Fatalf("a path of %d bytes kept", len(c.Path))
				}
				size += len(c.Path)
			}
			if len(kept) != tc.wantLen || (tc.wantLast != "" && kept[len(kept)-1].Path != tc.wantLast) {
				t.Fatalf("kept %d changes (%d bytes of paths), the last %.80q", len(kept), size, kept[len(kept)-1].Path)
			}
		})
	}
}
