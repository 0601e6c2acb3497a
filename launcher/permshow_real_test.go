package launcher

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/internal/fakeapi"
	"github.com/ccrelay/ccrelay/protocol"
)

// TestRealClaudeRemoteBigWrite: the real Claude Code asks permission for a
// Write of 2 MB in remote mode; the request is shown clipped within the
// relay's bound on an announcement, and allowing it writes the whole file.
func TestRealClaudeRemoteBigWrite(t *testing.T) {
	content := strings.Repeat("0123456789abcdef", 2<<20/16)
	yes, no := fakeapi.Bool(true), fakeapi.Bool(false)
	rig, e := realRemote(t,
		fakeapi.Rule{LastUserContains: "write the big file", AfterToolResult: no, Reply: []fakeapi.Block{
			fakeapi.ToolUse("Write", map[string]any{"file_path": "big.txt", "content": content})}},
		fakeapi.Rule{AfterToolResult: yes, Reply: []fakeapi.Block{fakeapi.Text("Done.")}})
	rig.prompt("write the big file")
	st := rig.untilState("a permission request", func(s SessionState) bool { return len(s.Permissions) == 1 })
	b, _ := json.Marshal(st)
	p := st.Permissions[0]
	if len(b) > protocol.MaxInfoBytes || p.Tool != "Write" || !p.Clipped || len(p.Input) > MaxShownRequest {
		t.Fatalf("state of %d bytes; request %s, clipped %v, %d bytes of input", len(b), p.Tool, p.Clipped, len(p.Input))
	}
	if err := rig.r.Answer(p.ID, true, nil, false, ""); err != nil {
		t.Fatal(err)
	}
	rig.until("turn end", has("TE(completed)", 1))
	got, err := os.ReadFile(filepath.Join(e.Project, "big.txt"))
	if err != nil || string(got) != content {
		t.Fatalf("the file holds %d bytes, want %d: %v", len(got), len(content), err)
	}
}
