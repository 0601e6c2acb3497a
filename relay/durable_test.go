package relay

import (
	"testing"

	"github.com/ccrelay/ccrelay/internal/durable"
)

// A new token survives power loss: the file and its folder are fsynced
// before the token is handed out.
func TestTokenFileDurable(t *testing.T) {
	dir := t.TempDir()
	var steps []string
	defer durable.SetHooks(durable.Hooks{
		Sync:    func(p string, f durable.File) error { steps = append(steps, "sync"); return f.Sync() },
		SyncDir: func(d string) error { steps = append(steps, "syncdir"); return nil },
	})()
	if _, err := LoadOrCreateToken(dir); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0] != "sync" || steps[1] != "syncdir" {
		t.Fatalf("steps %v", steps)
	}
}
