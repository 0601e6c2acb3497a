package launcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/ccrelay/ccrelay/codex"
)

// syncBuffer is what the client writes to app-server, read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// feedCodex hands a CodexRemote app-server's lines (no process): the
// handler reads them as a running app-server's; what it answers is in the
// buffer returned.
func feedCodex(t *testing.T, lines []string) (*CodexRemote, *syncBuffer) {
	t.Helper()
	r := NewCodexRemote(CodexRemoteOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil, nil)
	r.thread = fakeThreadID
	t.Cleanup(r.q.Close)
	out := &syncBuffer{}
	c := codex.NewClient(strings.NewReader(strings.Join(lines, "\n")+"\n"), out, &codexHandler{r: r})
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return r, out
}

// At most MaxInfoPermissionsShown requests wait for the app; the next is
// declined at once (and answered: Codex waits for every answer).
func TestCodexRemotePendingBound(t *testing.T) {
	var lines []string
	for i := range MaxInfoPermissionsShown + 1 {
		b, _ := json.Marshal(map[string]any{"id": i, "method": codex.RequestCommandApproval, "params": map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": fmt.Sprintf("call_%d", i), "command": "ls", "startedAtMs": 1}})
		lines = append(lines, string(b))
	}
	r, out := feedCodex(t, lines)
	if st := r.State(); len(st.Permissions) != MaxInfoPermissionsShown || st.Status != StatusPermission {
		t.Fatalf("%d requests shown, want %d", len(st.Permissions), MaxInfoPermissionsShown)
	}
	answers := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(answers) != 1 || !strings.Contains(answers[0], fmt.Sprintf(`"id":%d`, MaxInfoPermissionsShown)) || !strings.Contains(answers[0], `"decline"`) {
		t.Fatalf("answers %q, want the last request declined alone", answers)
	}
}

// A turn keeps the changes of its last MaxCodexChanges fileChange items
// for the approvals that name them; an approval of an older one says Codex
// did not say which files.
func TestCodexRemoteChangesBound(t *testing.T) {
	var lines []string
	for i := range MaxCodexChanges + 1 {
		b, _ := json.Marshal(map[string]any{"method": codex.NotifyItemStarted, "params": map[string]any{"threadId": fakeThreadID, "turnId": fakeTurn,
			"item": map[string]any{"type": "fileChange", "id": fmt.Sprintf("item_%d", i), "status": "inProgress",
				"changes": []map[string]any{{"path": fmt.Sprintf("/p/f%d.txt", i), "kind": map[string]any{"type": "add"}, "diff": "+x\n"}}}}})
		lines = append(lines, string(b))
	}
	for i, item := range []string{"item_0", fmt.Sprintf("item_%d", MaxCodexChanges)} {
		b, _ := json.Marshal(map[string]any{"id": i, "method": codex.RequestFileChangeApproval, "params": map[string]any{
			"threadId": fakeThreadID, "turnId": fakeTurn, "itemId": item, "startedAtMs": 1}})
		lines = append(lines, string(b))
	}
	r, _ := feedCodex(t, lines)
	if n := len(r.changes); n != MaxCodexChanges || len(r.order) != MaxCodexChanges {
		t.Fatalf("%d items kept (%d in order), want %d", n, len(r.order), MaxCodexChanges)
	}
	st := r.State()
	if len(st.Permissions) != 2 {
		t.Fatalf("shown %+v", st.Permissions)
	}
	old, last := st.Permissions[0], st.Permissions[1]
	if !strings.Contains(old.Description, "did not say which files") || strings.Contains(string(old.Input), "/p/f0.txt") {
		t.Errorf("the evicted item's request: %q %s", old.Description, old.Input)
	}
	if want := fmt.Sprintf("/p/f%d.txt", MaxCodexChanges); !strings.Contains(string(last.Input), want) {
		t.Errorf("the last item's request %s, want %s", last.Input, want)
	}
}
