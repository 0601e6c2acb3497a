package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var fakeClaude string

func TestMain(m *testing.M) {
	if os.Getenv(fakeAppServerEnv) != "" {
		// This binary stands in for codex app-server (codex_remote_fake_test.go).
		os.Exit(runFakeAppServer())
	}
	// The package's tests get a temporary folder of their own, removed at
	// the end: a ccrelay or Claude that a test kills on purpose cannot
	// clean up its own files (a hook folder, say).
	tmp, err := os.MkdirTemp("", "launcher-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("TMPDIR", tmp)
	defer os.RemoveAll(tmp)
	dir, err := os.MkdirTemp("", "fakeclaude")
	if err != nil {
		panic(err)
	}
	fakeClaude = filepath.Join(dir, "claude")
	if out, err := exec.Command("go", "build", "-o", fakeClaude, "../internal/fakeclaude").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.RemoveAll(tmp)
	os.Exit(code)
}

type fakeRun struct {
	home, project string
	env           []string
}

func newFakeRun(t *testing.T, sc map[string]any, extraEnv ...string) *fakeRun {
	t.Helper()
	r := &fakeRun{home: t.TempDir(), project: t.TempDir()}
	p := filepath.Join(t.TempDir(), "script.json")
	b, _ := json.Marshal(sc)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r.env = append([]string{"HOME=" + r.home, "PATH=/usr/bin:/bin", "FAKE_CLAUDE_SCRIPT=" + p}, extraEnv...)
	return r
}

func (r *fakeRun) options(onSession func(SessionStart)) LocalOptions {
	return LocalOptions{Claude: fakeClaude, Dir: r.project, Env: r.env, HookCommand: []string{fakeClaude, "hook"},
		OnSession: onSession, StopTimeout: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestRunLocalHookAndExitCode(t *testing.T) {
	r := newFakeRun(t, map[string]any{"lines": []string{
		`{"type":"user","uuid":"u1","sessionId":"{{session}}","message":{"content":"hi"}}`}, "exit": 3})
	var mu sync.Mutex
	var got []SessionStart
	o := r.options(func(s SessionStart) { mu.Lock(); got = append(got, s); mu.Unlock() })
	o.Args = []string{"--session-id", "11111111-2222-4333-8444-555555555555", "--model", "opus"}
	code, err := RunLocal(context.Background(), o)
	if err != nil || code != 3 {
		t.Fatalf("RunLocal = %d, %v", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].SessionID != "11111111-2222-4333-8444-555555555555" || got[0].Source != "startup" ||
		!strings.HasSuffix(got[0].TranscriptPath, "/11111111-2222-4333-8444-555555555555.jsonl") {
		t.Fatalf("hooks: %+v", got)
	}
}

// waitForTranscript waits until the fake claude has written its transcript.
func waitForTranscript(t *testing.T, home string) {
	t.Helper()
	deadline := time.Now().Add(untilLimit)
	for {
		m, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
		if len(m) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no transcript")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Cancelling stops Claude: SIGTERM, and SIGKILL when it does not listen.
func TestRunLocalStopsClaude(t *testing.T) {
	for _, stubborn := range []bool{false, true} {
		t.Run(fmt.Sprintf("stubborn=%v", stubborn), func(t *testing.T) {
			var env []string
			if stubborn {
				env = append(env, "FAKE_CLAUDE_IGNORE_TERM=1")
			}
			r := newFakeRun(t, map[string]any{"lines": []string{`{"type":"user","uuid":"u1","message":{"content":"hi"}}`}, "hang": true}, env...)
			ctx, cancel := context.WithCancel(context.Background())
			type res struct {
				code int
				err  error
			}
			done := make(chan res, 1)
			go func() { c, err := RunLocal(ctx, r.options(nil)); done <- res{c, err} }()
			waitForTranscript(t, r.home)
			cancel()
			select {
			case got := <-done:
				want := 128 + int(syscall.SIGTERM)
				if stubborn {
					want = 128 + int(syscall.SIGKILL)
				}
				if got.err != nil || got.code != want {
					t.Fatalf("RunLocal = %d, %v; want %d", got.code, got.err, want)
				}
			case <-time.After(untilLimit):
				t.Fatal("RunLocal did not return")
			}
		})
	}
}

func TestRunLocalClaudeNotFound(t *testing.T) {
	_, err := RunLocal(context.Background(), LocalOptions{Claude: filepath.Join(t.TempDir(), "claude")})
	if !errors.Is(err, ErrClaudeNotFound) || !strings.Contains(err.Error(), "npm install -g @anthropic-ai/claude-code") {
		t.Fatalf("err = %v", err)
	}
}

func TestHookRejectsWrongToken(t *testing.T) {
	called := false
	h, err := startHookServer(func(SessionStart) { called = true }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	file := func(token string) string {
		p := filepath.Join(t.TempDir(), "hook.json")
		b, _ := json.Marshal(hookFile{URL: h.url, Token: token})
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const in = `{"session_id":"11111111-2222-4333-8444-555555555555"}`
	err = ForwardHook(context.Background(), strings.NewReader(in), file("wrong"))
	if err == nil || called || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, called = %v", err, called)
	}
	if err := ForwardHook(context.Background(), strings.NewReader(in), file(h.token)); err != nil || !called {
		t.Fatalf("err = %v, called = %v", err, called)
	}
	if !strings.HasPrefix(h.url, "http://127.0.0.1:") {
		t.Fatalf("hook endpoint not on loopback: %s", h.url)
	}
}
