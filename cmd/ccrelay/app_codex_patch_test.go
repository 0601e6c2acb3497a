package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A Codex apply_patch call shows each file of the patch with its change:
// the file Codex numbered when it applied the patch (the end's diff) with
// its line numbers, an added file numbered from 1, the others as the patch
// gives them; a refused patch shows its files and the error; a malformed
// diff breaks nothing.
func TestAppCodexPatch(t *testing.T) {
	patch := "*** Begin Patch\n*** Update File: a.txt\n@@\n line2\n-line3\n+LINE3\n line4\n*** Add File: new.txt\n+one\n+two\n*** Delete File: gone.txt\n*** End Patch\n"
	args := map[string]any{"input": patch, "files": []any{
		map[string]any{"op": "update", "path": "a.txt"}, map[string]any{"op": "add", "path": "new.txt"}, map[string]any{"op": "delete", "path": "gone.txt"}}}
	diff := map[string]any{"path": "/home/user/proj/a.txt", "op": "update", "hunks": []any{
		map[string]any{"oldStart": 12, "oldLines": 3, "newStart": 12, "newLines": 3, "lines": []any{" line2", "-line3", "+LINE3", " line4"}}}}
	calls := []corpusCall{
		{File: "a", Name: "apply_patch", Args: args, Result: "Success. Updated the following files:\nM a.txt\nA new.txt\nD gone.txt\n", Status: "done", Diff: diff},
		{File: "b", Name: "apply_patch", Args: args, Result: "patch rejected by user", Status: "failed"},
		{File: "c", Name: "apply_patch", Args: args, Status: "done", Diff: map[string]any{"hunks": "x", "path": 5}},
		{File: "d", Name: "apply_patch", Args: args, Status: "done", Diff: map[string]any{"path": "/p/a.txt", "hunks": []any{5, map[string]any{"lines": []any{5, nil, "+x"}, "oldStart": -3}}}},
		{File: "e", Name: "apply_patch", Args: map[string]any{"input": 7, "files": "x"}, Status: "done"},
	}
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, chromedp.Navigate(r.base+"/"))
	out := renderCalls(t, ctx, r.base, calls)
	for i, got := range out {
		if got.Err != "" || got.Tool != "apply_patch" || got.Generic {
			t.Errorf("call %d: error %q, tool %q, generic %v", i, got.Err, got.Tool, got.Generic)
		}
	}
	a := out[0]
	if a.Title != "3 files" || !a.Numbered || a.FirstNo != "12" || !slices.Equal(a.Adds, []string{"LINE3", "one", "two"}) || !slices.Equal(a.Dels, []string{"line3"}) ||
		!strings.Contains(a.Text, "gone.txt") || !strings.Contains(a.Text, "Success. Updated") {
		t.Errorf("applied patch: %+v", a)
	}
	b := out[1]
	if !slices.Equal(b.Adds, []string{"LINE3", "one", "two"}) || !strings.Contains(b.Text, "patch rejected by user") {
		t.Errorf("refused patch: %+v", b)
	}
	if c := out[2]; !slices.Equal(c.Adds, []string{"LINE3", "one", "two"}) {
		t.Errorf("a diff without hunks: the patch's changes are shown: %+v", c)
	}
}
