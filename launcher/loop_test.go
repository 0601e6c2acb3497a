package launcher

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/internal/envtest"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/protocol"
)

// Local → remote (a prompt from the app) → local (space pressed twice), on
// one session: the envelopes are complete, free of duplicates, equal the
// replay of the transcript both modes wrote, and no Claude is left running.
func TestLoopSwitchesLocalRemoteLocal(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	local := filepath.Join(t.TempDir(), "local.json")
	stream := filepath.Join(t.TempDir(), "stream.json")
	pidlog := filepath.Join(t.TempDir(), "pids")
	const sess = "66666666-2222-4333-8444-555555555555"
	rec := func(kind, uuid, text string) string {
		b, _ := json.Marshal(map[string]any{"type": kind, "uuid": uuid, "sessionId": "{{session}}",
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "message": map[string]any{"role": kind, "content": text}})
		if kind == "assistant" {
			b, _ = json.Marshal(map[string]any{"type": kind, "uuid": uuid, "sessionId": "{{session}}",
				"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "message": map[string]any{"id": "msg-" + uuid, "role": kind,
					"content": []any{map[string]any{"type": "text", "text": text}}}})
		}
		return string(b)
	}
	writeJSON(t, local, map[string]any{"lines": []string{
		rec("user", "lu-{{source}}", "typed in the terminal ({{source}})"),
		rec("assistant", "la-{{source}}", "local answer ({{source}})"),
	}, "intervalMs": 5, "hang": true})
	writeJSON(t, stream, map[string]any{"turns": []any{steps(map[string]any{"text": "remote answer"})}})
	arglog := filepath.Join(t.TempDir(), "args")
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + local, "FAKE_CLAUDE_STREAM=" + stream, "FAKE_CLAUDE_PIDLOG=" + pidlog,
		"FAKE_CLAUDE_ARGLOG=" + arglog}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	out := &MemOutbox{}
	sr := startScan(t, home, project, out, log)
	pipe, projectDir := sr.pipe, sr.projectDir

	keysR, keysW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer keysR.Close()
	defer keysW.Close()
	cmds := make(chan Command)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startLoop(ctx, LoopOptions{
		Local:    fakeLocal(project, env, log, "--session-id", sess, "--permission-mode", "plan", "--model", "opus-x"),
		Remote:   RemoteOptions{StopTimeout: time.Second},
		Pipeline: pipe, Scanner: sr.sc, Commands: cmds, Events: ev, Keys: keysR, Logger: log,
	})
	rig := &remoteRig{t: t, out: out, ev: ev}
	rig.until("the local turn", has("A(local answer (startup))", 1))
	waitFor(t, "local mode announced", func() bool { return ev.last().Mode == "local" })

	// A prompt from the app takes the session over.
	replies := sendPrompt(cmds, "c1", "from the app")
	if err := <-replies; err != nil {
		t.Fatalf("prompt rejected: %v", err)
	}
	rig.until("the remote turn", has("A(remote answer)", 1))
	waitFor(t, "remote mode announced", func() bool { return ev.last().Mode == "remote" })
	// The same command again (the relay delivers at least once) is ignored.
	cmds <- Command{Command: protocol.Command{ID: "c1", Kind: protocol.CommandPrompt, Text: "from the app"}, Reply: func(err error) { t.Error("repeat answered") }}
	rig.until("the remote turn's end", has("TE(completed)", 2))

	// Space twice in the terminal takes it back.
	keysW.Write([]byte("  "))
	rig.until("the local turn after resume", has("A(local answer (resume))", 1))
	waitFor(t, "local mode announced again", func() bool { return ev.last().Mode == "local" })

	cancel()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Close as the command layer does when Claude is gone.
	if err := sr.stop(); err != nil {
		t.Fatal(err)
	}
	if err := pipe.Close(context.Background(), protocol.StatusCompleted, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	live := out.Envelopes()
	envtest.CheckInvariants(t, live)
	d := describeAll(live)
	envtest.Eq(t, d, "U(typed in the terminal (startup))", "TS", "A(local answer (startup))", "TE(completed)",
		"U(from the app)", "TS", "A(remote answer)", "TE(completed)",
		"U(typed in the terminal (resume))", "TS", "A(local answer (resume))", "TE(completed)")
	for _, e := range live {
		if e.ID == "" {
			t.Fatal("envelope without id")
		}
	}
	want := replayFiles(t, filepath.Join(projectDir, sess+".jsonl"))
	if n := len(want); len(live) != n+1 || live[n].Ev.T != protocol.KindTurnEnd {
		t.Fatalf("live %q\nreplay %q", d, describeAll(want))
	}
	for i := range want {
		if want[i].ID != live[i].ID {
			t.Fatalf("envelope %d: live %s, replay %s", i, d[i], describe(want[i]))
		}
	}
	// The remote and the second local Claude continue the session, its id
	// in the same argv item as --resume.
	argv := readArgLog(t, arglog)
	if len(argv) != 3 || !slices.Contains(argv[1], "--resume="+sess) || !slices.Contains(argv[2], "--resume="+sess) ||
		slices.Contains(argv[1], "--resume") || slices.Contains(argv[2], "--resume") {
		t.Fatalf("argv of the three starts: %q", argv)
	}
	// The user's permission mode and model survive the take-over and the
	// way back; --session-id is not given with --resume (Claude refuses
	// both together).
	for i, args := range argv[1:] {
		if !hasFlag(args, "--permission-mode", "plan") || !hasFlag(args, "--model", "opus-x") || slices.Contains(args, "--session-id") {
			t.Errorf("start %d: %q", i+2, args)
		}
	}
	// Every Claude started (local, remote, local) is gone.
	b, _ := os.ReadFile(pidlog)
	pids := strings.Fields(string(b))
	if len(pids) != 3 {
		t.Fatalf("started %d claude processes, want 3: %v", len(pids), pids)
	}
	for _, p := range pids {
		pid, _ := strconv.Atoi(p)
		if testutil.ProcessAlive(pid) {
			t.Errorf("claude %d outlived its mode", pid)
		}
	}
}

// hasFlag reports whether args set name to value (--name value or
// --name=value).
func hasFlag(args []string, name, value string) bool {
	for i, a := range args {
		if a == name+"="+value || (a == name && i+1 < len(args) && args[i+1] == value) {
			return true
		}
	}
	return false
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(untilLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
