package relay

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// ntfyRecorder is an ntfy topic that keeps what is posted to it.
type ntfyRecorder struct {
	mu    sync.Mutex
	texts []string
	got   chan struct{}
}

func (n *ntfyRecorder) Send(title, text, link string) error {
	n.mu.Lock()
	n.texts = append(n.texts, text)
	n.mu.Unlock()
	select {
	case n.got <- struct{}{}:
	default:
	}
	return nil
}

// wait returns the texts once there are n.
func (n *ntfyRecorder) wait(t *testing.T, count int) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		n.mu.Lock()
		texts := append([]string(nil), n.texts...)
		n.mu.Unlock()
		if len(texts) >= count {
			return texts
		}
		select {
		case <-n.got:
		case <-deadline:
			t.Fatalf("waited for %d ntfy posts, have %q", count, texts)
		}
	}
}

// ntfy's generic texts name the session's agent: Codex for a Codex
// session, Claude for one that names Claude Code or no agent (an older
// CLI), and no agent for a sealed session, whose agent is sealed with the
// rest of its summary.
func TestPushNtfyNamesTheAgent(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "relay.db"))
	rs := NewServer(st, slog.New(slog.NewTextHandler(io.Discard, nil)), testToken)
	ntfy := &ntfyRecorder{got: make(chan struct{}, 1)}
	if err := rs.EnablePush(PushOptions{Ntfy: ntfy}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)
	r := &pushRelay{srv: srv, rs: rs}
	sealed := strings.Repeat("QUJD", 15)
	for i, c := range []struct {
		info, waiting, failed string
	}{
		{`"agent":"codex"`, "Codex is waiting for your permission", "A Codex session failed"},
		{`"agent":"claude"`, "Claude is waiting for your permission", "A Claude session failed"},
		{`"cwd":"/w"`, "Claude is waiting for your permission", "A Claude session failed"},
		{`"sealed":"` + sealed + `"`, "A session is waiting for your permission", "A session failed"},
	} {
		session := "fc141a3b-0000-4000-8000-00000000010" + string(rune('0'+i))
		cli := &script{t: t, c: r.dial(t, "/ws/cli"), session: session}
		cli.announce(`{"mode":"remote","status":"waiting-for-permission","permissions":[{"id":"p1","tool":"Bash"}],` + c.info + `}`)
		cli.announce(`{"mode":"remote","status":"idle","error":"it stopped",` + c.info + `}`)
		texts := ntfy.wait(t, 2*(i+1))
		if got := texts[2*i:]; got[0] != c.waiting || got[1] != c.failed {
			t.Errorf("%s: ntfy said %q, want %q, %q", c.info, got, c.waiting, c.failed)
		}
	}
}
