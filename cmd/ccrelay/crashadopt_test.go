package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccrelay/ccrelay/claude"
	"github.com/ccrelay/ccrelay/internal/crashpoint"
	"github.com/ccrelay/ccrelay/internal/testutil"
	"github.com/ccrelay/ccrelay/launcher"
	"github.com/ccrelay/ccrelay/protocol"
)

// Every crash point of a take-over: a ccrelay that ran beside another in
// the folder left its slot with envelopes it could not send (the relay was
// down), among them a pasted image and a cut tool result with their blobs.
// The next ccrelay takes the slot over and is killed at the step; one more
// runs without a crash. The relay ends with exactly replay of the left
// session's transcript, each blob beside its envelope, and no slot left.
func TestCrashPointsAdopt(t *testing.T) {
	buildFakeClaude(t)
	// adopt-copied@2: the left session has more envelopes than one copy
	// takes (apiclient's adoptBatch, 256).
	for _, step := range []string{crashpoint.AdoptCopied, crashpoint.AdoptCopied + "@2", crashpoint.SlotRenamed} {
		t.Run(step, func(t *testing.T) {
			const session = "56565656-2222-4333-8444-555555555555"
			rl := startCrashRelay(t, "")
			r := newLocalRun(t, leftLines(t), map[string]any{"intervalMs": 0})
			base := filepath.Join(r.state, "projects", claude.EscapeProjectPath(r.project))
			// Another ccrelay holds the folder's first slot: this run takes
			// run-1.
			first, err := launcher.ClaimRunDir(base)
			if err != nil {
				t.Fatal(err)
			}
			rl.cmd.Process.Signal(syscall.SIGTERM)
			<-rl.exited
			leaveSlot(t, r.command("--relay", rl.base, "--relay-token", rl.token, "--", "--session-id", session))
			if _, err := os.Stat(filepath.Join(base, "run-1", "outbox", "outbox.log")); err != nil {
				t.Fatalf("the run left no outbox in its slot: %v", err)
			}
			first.Release()
			rl.watch(restartServe(t, rl.data, rl.addr))

			// The next ccrelay takes the slot over and is killed at the
			// step; one more runs without a crash. Each runs a session of
			// its own.
			for i, point := range []string{step, ""} {
				own := fmt.Sprintf("78787878-2222-4333-8444-55555555555%d", i)
				b, _ := json.Marshal(map[string]any{"lines": []string{userLine("o1", 0, "hello"), `{"type":"assistant","uuid":"o2","sessionId":"{{session}}","timestamp":"2026-11-22T11:00:01.000Z","message":{"id":"mo","role":"assistant","content":[{"type":"text","text":"hi"}]}}`}})
				os.WriteFile(r.script, b, 0o644)
				cmd := r.command("--relay", rl.base, "--relay-token", rl.token, "--", "--session-id", own)
				if point != "" {
					cmd.Env = append(cmd.Env, crashpoint.Env+"="+point)
				}
				stderr := &testutil.SyncBuffer{}
				cmd.Stderr = stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if crashed := waitCLI(t, cmd, rl, stderr); crashed != (point != "") {
					t.Fatalf("run %d (crash point %q): crashed %v\n%s", i+1, point, crashed, stderr)
				}
			}

			matches, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
			if len(matches) != 1 {
				t.Fatalf("transcript: %v", matches)
			}
			want := strings.Split(strings.TrimSuffix(run(t, "replay", "--format", "jsonl", "-q", matches[0]).stdout, "\n"), "\n")
			got := storedLines(t, rl.data, session)
			sameEnvelopes(t, closedTurn(t, got), want)
			blobs := 0
			for _, l := range got {
				var e protocol.Envelope
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatal(err)
				}
				var size int64
				switch {
				case e.Ev.T == protocol.KindFile:
					size = *e.Ev.Size
				case e.Ev.T == protocol.KindToolCallEnd && e.Ev.Full > 0:
					size = e.Ev.Full
				default:
					continue
				}
				if b := storedBlob(t, rl.data, session, e.ID); int64(len(b)) != size {
					t.Errorf("%s: the relay keeps %d bytes beside it, want %d", describeEnv(e), len(b), size)
				}
				blobs++
			}
			if blobs != 2 {
				t.Errorf("%d envelopes with a blob, want 2 (the image, the cut result)", blobs)
			}
			if left, _ := filepath.Glob(filepath.Join(base, "*run-*")); len(left) > 0 {
				t.Errorf("slots left: %v", left)
			}
			t.Logf("%d envelopes of the left session, %d with a blob", len(got), blobs)
		})
	}
}

// leftLines is a session whose run leaves its slot: a prompt with a pasted
// image, a Bash call whose result is cut (its full text goes as a blob),
// and 300 answers.
func leftLines(t *testing.T) []string {
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewGray(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	img := fmt.Sprintf(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":%q}}`, base64.StdEncoding.EncodeToString(pic.Bytes()))
	result := strings.Repeat("line of output\n", 2000)
	lines := []string{
		`{"type":"user","uuid":"u1","sessionId":"{{session}}","timestamp":"2026-11-22T09:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"what is this?"},` + img + `]}}`,
		`{"type":"assistant","uuid":"a1","sessionId":"{{session}}","timestamp":"2026-11-22T09:00:01.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}}`,
		fmt.Sprintf(`{"type":"user","uuid":"u2","sessionId":"{{session}}","timestamp":"2026-11-22T09:00:02.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":%q}]}}`, result),
	}
	return append(lines, bigLines(0, 300, 60)...)
}

// leaveSlot runs cmd (a ccrelay whose relay is down) until its Claude has
// exited and it waits to send the rest, and stops it there: what it did
// not send stays in its slot.
func leaveSlot(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	w := &watchWriter{phrase: "ccrelay: sending the last", seen: make(chan struct{})}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-w.seen:
		cmd.Process.Signal(os.Interrupt)
	case <-done:
		t.Fatalf("ccrelay ended before sending the rest: %v\n%s", cmd.ProcessState, w.text())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("ccrelay never came to sending the rest\n%s", w.text())
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("ccrelay did not stop on Ctrl-C\n%s", w.text())
	}
	if killed(cmd) {
		t.Fatalf("ccrelay was killed\n%s", w.text())
	}
}

// watchWriter keeps what is written to it and closes seen once it holds
// phrase.
type watchWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	phrase string
	seen   chan struct{}
	once   sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.phrase) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
