package scanner

import (
	"path/filepath"
	"testing"

	"github.com/ccrelay/ccrelay/internal/durable"
)

// A saved cursor survives power loss: its file is fsynced before the
// rename and its folder after.
func TestCursorSaveDurable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursor.json")
	var steps []string
	defer durable.SetHooks(durable.Hooks{
		Sync:    func(p string, f durable.File) error { steps = append(steps, "sync "+filepath.Base(p)); return f.Sync() },
		SyncDir: func(d string) error { steps = append(steps, "syncdir "+d); return nil },
	})()
	if err := (Cursor{}).Save(path); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0] != "sync cursor.json.tmp" || steps[1] != "syncdir "+dir {
		t.Fatalf("steps %v", steps)
	}
}
