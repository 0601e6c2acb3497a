package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ccrelay/ccrelay/protocol"
)

// The hook takes only UUIDs as session ids: anything else would reach
// Claude's command line (--resume) and name files.
func TestHookRefusesSessionIDNotUUID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"11111111-2222-4333-8444-555555555555", true},
		{"ABCDEF01-2222-4333-8444-555555555555", true},
		{"--dangerously-skip-permissions", false},
		{"s", false},
		{"../../../etc/passwd", false},
		{"11111111-2222-4333-8444-55555555555", false},
		{"11111111-2222-4333-8444-555555555555\n--model=x", false},
		{" 11111111-2222-4333-8444-555555555555", false},
		{"11111111-2222-4333-8444-55555555555g", false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			var got []string
			h, err := startHookServer(func(s SessionStart) { got = append(got, s.SessionID) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer h.close()
			body, _ := json.Marshal(SessionStart{SessionID: tc.id, Source: "startup"})
			req, _ := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+h.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tc.ok != (resp.StatusCode == http.StatusOK) || tc.ok != (len(got) == 1) {
				t.Fatalf("status %s, sessions %q; want accepted=%v", resp.Status, got, tc.ok)
			}
		})
	}
}

// The session id goes to Claude as one argv item, --session-id=<id> on the
// first start and --resume=<id> after.
func TestRemoteSessionIDIsOneArgvItem(t *testing.T) {
	for _, resume := range []bool{false, true} {
		want := "--session-id=" + rigSession
		if resume {
			want = "--resume=" + rigSession
		}
		t.Run(want, func(t *testing.T) {
			rig := newRemoteRig(t, map[string]any{"turns": []any{steps(map[string]any{"text": "ok"})}}, RemoteOptions{Resume: resume})
			rig.prompt("hi")
			rig.until("turn", has("TE(completed)", 1))
			argv := rig.argv()
			if len(argv) != 1 || !slices.Contains(argv[0], want) {
				t.Fatalf("argv %q, want an item %q", argv, want)
			}
			for _, a := range argv[0] {
				if a == "--resume" || a == "--session-id" || a == "-r" {
					t.Fatalf("argv %q has %q apart from its value", argv[0], a)
				}
			}
		})
	}
}

// A session id that is not a UUID never reaches Claude.
func TestRemoteRefusesSessionIDNotUUID(t *testing.T) {
	arglog := filepath.Join(t.TempDir(), "args")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "FAKE_CLAUDE_ARGLOG=" + arglog}
	const bad = "--dangerously-skip-permissions"
	r := NewRemote(bad, RemoteOptions{Claude: fakeClaude, Dir: t.TempDir(), Env: env, Logger: log}, NewPipeline("", &MemOutbox{}), &events{})
	defer r.Stop(protocol.StatusCancelled)
	if err := r.Prompt(context.Background(), "hi"); err == nil || !strings.Contains(err.Error(), "not a UUID") {
		t.Fatalf("prompt: %v", err)
	}
	code, err := RunLoop(context.Background(), LoopOptions{StartRemote: true, Session: bad,
		Local: LocalOptions{Claude: fakeClaude, Env: env}, Pipeline: NewPipeline("", &MemOutbox{}), Logger: log})
	if err == nil || !strings.Contains(err.Error(), "not a UUID") {
		t.Fatalf("RunLoop = %d, %v", code, err)
	}
	if argv := readArgLog(t, arglog); len(argv) != 0 {
		t.Fatalf("claude started: %q", argv)
	}
}
