//go:build unix

package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/claudetest"
	"github.com/ccrelay/ccrelay/internal/fakeapi"
)

// The real Claude Code under RunLocal with the user's own --settings: their
// permission mode, their SessionStart hook and their status line all apply,
// ccrelay's hook fires too, and ccrelay's status line shows after theirs.
func TestRealClaudeUserSettingsApply(t *testing.T) {
	e := claudetest.New(t, fakeapi.Rule{Reply: []fakeapi.Block{fakeapi.Text("hello")}})
	ptmx, tty, scr := newTerminal(t, 160)

	marker := filepath.Join(t.TempDir(), "user-hook-ran")
	user := `{"permissions":{"defaultMode":"plan"},"statusLine":{"type":"command","command":"echo MYSTATUS"},` +
		`"hooks":{"SessionStart":[{"matcher":"*","hooks":[{"type":"command","command":"touch ` + marker + `"}]}]}}`
	// ccrelay's status line command, played by the shell: it runs the
	// user's line from the file ccrelay keeps it in and adds its part.
	sl := &StatusLine{StatusFile: filepath.Join(t.TempDir(), "status.json"), Command: []string{"/bin/sh", "-c",
		`cat >/dev/null; c=$(sed -n 's/.*"command":"\([^"]*\)".*/\1/p' "$4"); echo "$(sh -c "$c") RELAYPART"`, "sh"}}
	var sessions []string
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		code, err := RunLocal(ctx, LocalOptions{Claude: e.Claude, Args: []string{"--settings", user}, Dir: e.Project, Env: e.Environ(),
			Stdin: tty, Stdout: tty, Stderr: tty, HookCommand: []string{buildHookForwarder(t), "hook"}, StatusLine: sl,
			OnSession: func(s SessionStart) {
				mu.Lock()
				sessions = append(sessions, s.SessionID)
				mu.Unlock()
			}})
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	waitScreen(t, scr, "the status lines and plan mode", func(s string) bool {
		return strings.Contains(s, "MYSTATUS RELAYPART") && strings.Contains(strings.ToLower(s), "plan mode")
	})
	typeLine(t, ptmx, scr, "/exit")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		t.Fatal("claude did not exit on /exit")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the user's SessionStart hook did not run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sessions) == 0 {
		t.Fatal("ccrelay's SessionStart hook did not fire")
	}
}
