package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// NotebookEdit shows the notebook's name first, says what happens to which
// cell, and shows the new source: a diff against the cell as an earlier
// Read of the notebook showed it, a code cell highlighted, a markdown cell
// as Markdown; a deleted cell shows only what happens.
func TestAppNotebookEdit(t *testing.T) {
	r := startAppRelay(t)
	ctx := newBrowser(t)
	must(t, ctx, phone390(), chromedp.Navigate(r.base+"/"))
	const nb = "/home/dev/analysis/notebooks/explore.ipynb"
	read := "<cell id=\"c1\"><cell_type>markdown</cell_type># Title</cell id=\"c1\">\n<cell id=\"c2\">import pandas as pd\ndf = pd.read_csv('a.csv')\ndf.head()</cell id=\"c2\">"
	out := renderCalls(t, ctx, r.base, []corpusCall{
		{File: "s", Name: "Read", Args: map[string]any{"file_path": nb}, Result: read, Status: "done"},
		{File: "s", Name: "NotebookEdit", Args: map[string]any{"notebook_path": nb, "cell_id": "c2", "cell_type": "code", "new_source": "import pandas as pd\ndf = pd.read_csv('b.csv')\ndf.head()"}, Status: "done"},
		{File: "s", Name: "NotebookEdit", Args: map[string]any{"notebook_path": nb, "cell_id": "c2", "cell_type": "markdown", "edit_mode": "insert", "new_source": "## Findings\n\nThe *b* data is cleaner."}, Status: "done"},
		{File: "s", Name: "NotebookEdit", Args: map[string]any{"notebook_path": nb, "cell_id": "c1", "edit_mode": "delete"}, Status: "done"},
		{File: "t", Name: "NotebookEdit", Args: map[string]any{"notebook_path": nb, "cell_id": "c9", "new_source": "print('hi')"}, Status: "done"},
	})
	for i, o := range out {
		if o.Err != "" || o.Generic || o.Tool != "NotebookEdit" && i > 0 {
			t.Fatalf("card %d: %+v", i, o)
		}
	}
	if !strings.HasPrefix(out[1].Title, "explore.ipynb") {
		t.Errorf("title %q: the notebook's name first", out[1].Title)
	}
	if !strings.Contains(out[1].Text, "Replace cell c2 (code)") || !slices.Equal(out[1].Adds, []string{"df = pd.read_csv('b.csv')"}) || !slices.Equal(out[1].Dels, []string{"df = pd.read_csv('a.csv')"}) {
		t.Errorf("replace: %q, +%q −%q", out[1].Text, out[1].Adds, out[1].Dels)
	}
	if !strings.Contains(out[2].Text, "Insert a markdown cell after cell c2") || !strings.Contains(out[2].Text, "Findings") || strings.Contains(out[2].Text, "## Findings") {
		t.Errorf("insert markdown: %q", out[2].Text)
	}
	if !strings.Contains(out[3].Text, "Delete cell c1") || strings.Contains(out[3].Text, "Title") {
		t.Errorf("delete: %q", out[3].Text)
	}
	// No earlier Read of that cell: the new source, highlighted.
	if !strings.Contains(out[4].Text, "Replace cell c9") || !strings.Contains(out[4].Text, "print('hi')") || len(out[4].Adds) != 0 {
		t.Errorf("replace without a read: %q", out[4].Text)
	}
}
